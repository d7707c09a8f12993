build-san/common/util.o: common/util.c common/util.h common/err.h \
 common/banned.h
common/util.h:
common/err.h:
common/banned.h:
