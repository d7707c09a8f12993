build-san/tests/test_proto: tests/unit/test_proto.c tests/unit/t.h \
 remote/proto.h common/err.h common/util.h common/err.h common/banned.h
tests/unit/t.h:
remote/proto.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
