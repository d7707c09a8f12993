build-san/cli/conn.o: cli/conn.c cli/conn.h config/config.h common/err.h \
 common/util.h common/err.h common/banned.h remote/proto.h \
 cli/transport.h build-san/gen/agent_hash.h
cli/conn.h:
config/config.h:
common/err.h:
common/util.h:
common/err.h:
common/banned.h:
remote/proto.h:
cli/transport.h:
build-san/gen/agent_hash.h:
