build-san/cli/cmd_status.o: cli/cmd_status.c cli/gpurun.h config/config.h \
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
