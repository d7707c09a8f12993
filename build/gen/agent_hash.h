#define GR_AGENT_HASH "ebb5c25825e4f3ef"
