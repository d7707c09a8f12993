#define GR_AGENT_HASH "eb0e16bb50c85b83"
