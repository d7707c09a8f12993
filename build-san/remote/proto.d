build-san/remote/proto.o: remote/proto.c remote/proto.h common/err.h \
 common/util.h common/err.h common/banned.h
remote/proto.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
