build-san/config/config.o: config/config.c config/config.h common/err.h \
 common/util.h common/err.h common/banned.h
config/config.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
