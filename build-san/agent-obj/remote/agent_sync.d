build-san/agent-obj/remote/agent_sync.o: remote/agent_sync.c \
 remote/agent.h remote/proto.h common/err.h common/util.h common/err.h \
 common/banned.h
remote/agent.h:
remote/proto.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
