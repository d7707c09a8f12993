build-san/cli/ssh.o: cli/ssh.c cli/transport.h config/config.h \
 common/err.h common/util.h common/err.h common/banned.h
cli/transport.h:
config/config.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
