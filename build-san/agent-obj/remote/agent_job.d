build-san/agent-obj/remote/agent_job.o: remote/agent_job.c remote/agent.h \
 remote/proto.h common/err.h common/util.h common/err.h common/banned.h
remote/agent.h:
remote/proto.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
