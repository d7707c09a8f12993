build-san/agent-obj/remote/agent_exec.o: remote/agent_exec.c \
 remote/agent.h remote/proto.h common/err.h common/util.h common/err.h \
 common/banned.h
remote/agent.h:
remote/proto.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
