build-san/cli/cmd_pull.o: cli/cmd_pull.c cli/gpurun.h config/config.h \
 common/err.h common/util.h common/err.h common/banned.h cli/conn.h \
 remote/proto.h cli/transport.h cli/opts.h
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
