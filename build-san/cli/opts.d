build-san/cli/opts.o: cli/opts.c cli/opts.h common/err.h common/util.h \
 common/err.h common/banned.h
cli/opts.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
