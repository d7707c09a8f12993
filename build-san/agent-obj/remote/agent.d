build-san/agent-obj/remote/agent.o: remote/agent.c remote/agent.h \
 remote/proto.h common/err.h common/util.h common/err.h common/banned.h \
 build-san/gen/agent_hash.h
remote/agent.h:
remote/proto.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
build-san/gen/agent_hash.h:
