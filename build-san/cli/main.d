build-san/cli/main.o: cli/main.c build-san/gen/agent_hash.h cli/gpurun.h \
 config/config.h common/err.h common/util.h common/err.h common/banned.h \
 cli/conn.h remote/proto.h cli/transport.h cli/opts.h
build-san/gen/agent_hash.h:
cli/gpurun.h:
config/config.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
cli/conn.h:
remote/proto.h:
cli/transport.h:
cli/opts.h:
