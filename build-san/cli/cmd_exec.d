build-san/cli/cmd_exec.o: cli/cmd_exec.c cli/gpurun.h config/config.h \
 common/err.h common/util.h common/err.h common/banned.h cli/conn.h \
 remote/proto.h cli/transport.h cli/opts.h cli/remote_exec.h
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
cli/remote_exec.h:
