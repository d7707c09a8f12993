build-san/cli/transport_proc.o: cli/transport_proc.c cli/transport.h \
 config/config.h common/err.h common/util.h common/err.h common/banned.h
cli/transport.h:
config/config.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
