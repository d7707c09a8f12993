build-san/cli/remote_exec.o: cli/remote_exec.c cli/remote_exec.h \
 cli/conn.h config/config.h common/err.h common/util.h common/err.h \
 common/banned.h remote/proto.h cli/transport.h
cli/remote_exec.h:
cli/conn.h:
config/config.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
remote/proto.h:
cli/transport.h:
