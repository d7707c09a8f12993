# gpurun: one build for everything.
#   make            gpurun and gpurun-agent (build/)
#   make test       every test (unit, end-to-end, fuzz, kernels) under ASan+UBSan
#   make demo       the main job end to end on the embedded default
#   make bench      benchmarks against ssh / rsync
#   make soak       the randomized model tests at length: sync (SEEDS=N seeds
#                   of 20 batches, default 1000), the job house (JOB_SEEDS),
#                   the line for GPUs (QUEUE_SEEDS, default 2000) and pull
#                   (PULL_SEEDS seeds of PULL_STEPS steps); then
#                   each fuzz target for FUZZ_SECONDS (default 300)
#   make fuzz-soak  only that last part
#   make deps       install the Debian packages the build and tests need
#   make PORTABLE=1 the client with every POSIX fallback of compat/ forced
#                   on (what macOS and the BSDs get), in build-portable/
#                   (build-portable-san/ with SAN=1); the agent as always
#   make test-portable  every test against PORTABLE=1 SAN=1

CC      ?= cc
CLANG   ?= clang
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror -Wformat=2 -Wno-format-nonliteral -Wvla
CPPFLAGS += -D_GNU_SOURCE
# Each binary has its own include path: the client sees common/, config/
# and cli/'s folders, the agent common/ and remote/'s, so one binary
# including the other's header does not compile. common/ is exactly what
# both compile: utilities and errors, the wire (proto/) and the delta
# engine (delta/).
COMMON_DIRS := common common/proto common/delta compat
CLIENT_DIRS := $(COMMON_DIRS) config $(sort $(dir $(wildcard cli/*/*.h)))
AGENT_DIRS  := $(COMMON_DIRS) $(sort $(dir $(wildcard remote/*/*.h)))
CLIENT_INC  := $(patsubst %/,%,$(CLIENT_DIRS:%=-I%))
AGENT_INC   := $(patsubst %/,%,$(AGENT_DIRS:%=-I%))
SAN     ?=

# PORTABLE=1: compat.h's GR_PORTABLE, for the client's objects and unit
# tests only (ALL_CFLAGS); a build folder of its own.
ifeq ($(PORTABLE),1)
O       ?= build-portable$(if $(filter 1,$(SAN)),-san)
PORTABLE_FLAGS := -DGR_PORTABLE
endif

ifeq ($(SAN),1)
O       ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
O       ?= build
SANFLAGS :=
endif

CLIENT_LIBS := $(shell pkg-config --libs libssh2 libarchive libzstd inih 2>/dev/null || echo -lssh2 -larchive -lzstd -linih) -lrsync -lb2 -lcrypto -lpthread -lutil
# The static agent needs only these: it reads tar+zstd and writes pax,
# and --gc-sections drops the libarchive code that would call libxml2,
# ICU, nettle, acl, lzma, lz4, bz2 or zlib (measured: with the old, longer
# list the same libarchive members came in; the rest was dead weight). So
# a cross build needs only these four -dev:ARCH packages (install-deps.sh).
AGENT_STATIC_LIBS := -Wl,--start-group -larchive -lrsync -lb2 -lzstd -Wl,--end-group
AGENT_DYN_LIBS := -larchive -lrsync -lzstd -lb2 -lpthread

COMMON_SRC := $(wildcard common/*.c common/*/*.c)
# compat/: the client's; common/ and the agent see only compat.h (whose
# calls are inline on Linux), so its header counts in the agent's hash.
CLIENT_SRC := $(wildcard cli/*/*.c) $(wildcard config/*.c) $(wildcard compat/*.c)
# The agent's library (everything but main, so unit tests link it).
AGENT_SRC  := $(wildcard remote/*/*.c)
AGENT_HEADERS := $(wildcard common/*.h common/*/*.h compat/*.h remote/*/*.h)

# The agent's identity: a hash of everything it is built from (remote/,
# common/, this Makefile; nothing of the client). The client carries the
# same value, so a changed agent is uploaded again. One value for every
# agent a client carries (this machine's and the cross one, which build/
# and build-san/ share), so it leaves SAN out: the host's cache names the
# architecture too, and the cksum the boot script checks tells a SAN agent
# from a release one.
AGENT_HASH := $(shell cat $(sort $(AGENT_SRC) $(COMMON_SRC) $(AGENT_HEADERS)) remote/main.c Makefile | \
	sha256sum | cut -c1-16)

# Every client carries agents for linux-x86_64 and linux-aarch64: this
# machine's (in $(O)) and the other one, cross-compiled once, static and
# without sanitizers, into $(XO), which build/ and build-san/ both embed.
AGENT_ARCH := $(shell uname -m)
CROSS_ARCH := $(if $(filter aarch64,$(AGENT_ARCH)),x86_64,aarch64)
CROSS_CC   ?= $(CROSS_ARCH)-linux-gnu-gcc
XO         := build-$(CROSS_ARCH)

COMMON_OBJ := $(COMMON_SRC:%.c=$(O)/%.o)
# What common/ calls under PORTABLE=1 (the helpers link common/ alone).
COMPAT_OBJ := $(patsubst %.c,$(O)/%.o,$(wildcard compat/*.c))
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(O)/%.o) $(O)/agent_blob.o
AGENT_LIB_OBJ := $(AGENT_SRC:%.c=$(O)/agent-obj/%.o) $(COMMON_SRC:%.c=$(O)/agent-obj/%.o)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)
HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(O)/tests/%)
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)

ALL_CFLAGS := $(CPPFLAGS) $(PORTABLE_FLAGS) $(CLIENT_INC) -I$(O)/gen $(CFLAGS) $(WARN) $(SANFLAGS) -std=gnu11 -MMD -MP

# The hash lives in a generated header rewritten only when it changes, so
# exactly the objects that include it are rebuilt and client and agent agree.
HASH_H := $(O)/gen/agent_hash.h
$(foreach h,$(HASH_H) $(XO)/gen/agent_hash.h,$(shell mkdir -p $(dir $(h)); \
	echo '#define GR_AGENT_HASH "$(AGENT_HASH)"' > $(h).new; \
	cmp -s $(h).new $(h) || mv $(h).new $(h); rm -f $(h).new))

.PHONY: all test unit-bins demo bench soak fuzz-soak deps deps-check clean install kernels completions man
all: deps-check $(O)/gpurun $(O)/gpurun-agent

deps:
	@./scripts/install-deps.sh

# Cheap: install what is missing before the first build.
deps-check:
	@./scripts/install-deps.sh

# Order-only, so `make -j` on a fresh machine installs the headers before
# the first compile starts (phony: run once per make, 0.3 s when all is there).
$(O)/%.o: %.c | deps-check
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(O)/agent-obj/%.o: %.c | deps-check
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(AGENT_INC) -I$(O)/gen $(CFLAGS) $(WARN) -std=gnu11 -MMD -MP \
		$(if $(SAN),$(SANFLAGS),-ffunction-sections -fdata-sections) -c $< -o $@

# The agent without its main: what remote/main.c and the agent's unit
# tests link.
$(O)/libagent.a: $(AGENT_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# Static, so it runs on a host that has none of our libraries. Under SAN=1
# it is built dynamic with the sanitizers instead (the tests run it here).
$(O)/gpurun-agent: $(O)/agent-obj/remote/main.o $(O)/libagent.a
ifeq ($(SAN),1)
	$(CC) $(SANFLAGS) -o $@ $^ $(AGENT_DYN_LIBS)
else
	$(CC) -static -Wl,--gc-sections -o $@ $^ $(AGENT_STATIC_LIBS) 2>&1 | \
		{ grep -v 'statically linked applications requires at runtime' | grep -v 'in function' >&2 || true; }
	@test -x $@
	strip $@
endif

# The cross agent: static, -O2, no sanitizers whatever SAN says; built
# once here for build/ and build-san/ alike.
XAGENT_OBJ := $(patsubst %.c,$(XO)/obj/%.o,$(AGENT_SRC) $(COMMON_SRC) remote/main.c)
$(XO)/obj/%.o: %.c | deps-check
	@mkdir -p $(@D)
	$(CROSS_CC) $(CPPFLAGS) $(AGENT_INC) -I$(XO)/gen -O2 $(WARN) -std=gnu11 -MMD -MP \
		-ffunction-sections -fdata-sections -c $< -o $@

$(XO)/gpurun-agent: $(XAGENT_OBJ)
	$(CROSS_CC) -static -Wl,--gc-sections -o $@ $^ $(AGENT_STATIC_LIBS) 2>&1 | \
		{ grep -v 'statically linked applications requires at runtime' | grep -v 'in function' >&2 || true; }
	@test -x $@
	$(CROSS_ARCH)-linux-gnu-strip $@

# What the client expects each uploaded agent file to be (POSIX cksum: CRC
# and size), checked on the host before it runs (cli/conn/conn.c).
$(O)/gen/agent_sum.h: $(O)/gpurun-agent $(XO)/gpurun-agent
	{ printf '#define GR_AGENT_CKSUM_%s "%s"\n' \
		$(AGENT_ARCH) "$$(cksum < $(O)/gpurun-agent | cut -d' ' -f1,2)" \
		$(CROSS_ARCH) "$$(cksum < $(XO)/gpurun-agent | cut -d' ' -f1,2)"; } > $@.tmp && mv $@.tmp $@
$(O)/cli/conn/conn.o $(O)/fuzz-obj/cli/conn/conn.o: $(O)/gen/agent_sum.h

$(O)/agent.gz: $(O)/gpurun-agent
	gzip -9n -c $< > $@.tmp && mv $@.tmp $@

$(XO)/agent.gz: $(XO)/gpurun-agent
	gzip -9n -c $< > $@.tmp && mv $@.tmp $@

# Both agents, gzip'd, as gr_agent_blob_ARCH .. gr_agent_blob_ARCH_end.
$(O)/agent_blob.o: $(O)/agent.gz $(XO)/agent.gz
	for b in $(AGENT_ARCH):$(O)/agent.gz $(CROSS_ARCH):$(XO)/agent.gz; do \
		printf '.section .rodata\n.global gr_agent_blob_%s\n.global gr_agent_blob_%s_end\n.balign 16\ngr_agent_blob_%s:\n.incbin "%s"\ngr_agent_blob_%s_end:\n' \
			$${b%%:*} $${b%%:*} $${b%%:*} $${b#*:} $${b%%:*}; \
	done > $(O)/agent_blob.S
	printf '.section .note.GNU-stack,"",@progbits\n' >> $(O)/agent_blob.S
	$(CC) -c $(O)/agent_blob.S -o $@

$(O)/libgr.a: $(CLIENT_OBJ) $(COMMON_OBJ)
	rm -f $@ && ar rcs $@ $^

$(O)/gpurun: $(O)/cli/main.o $(O)/libgr.a
	$(CC) $(SANFLAGS) -o $@ $^ $(CLIENT_LIBS)

# Unit tests of the client link its library; those of the agent (named
# test_agent_*, test_job_*) its library and include path.
AGENT_UNIT := $(filter $(O)/tests/test_agent_% $(O)/tests/test_job_house $(O)/tests/test_job_queue $(O)/tests/test_job_slurm,$(UNIT_BIN))
# Pull's two halves meet in these: both libraries, both include paths.
BOTH_UNIT := $(O)/tests/test_job_art $(O)/tests/test_art_delta $(O)/tests/test_job_container
$(O)/tests/%: tests/unit/%.c $(O)/libgr.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ $< $(O)/libgr.a $(CLIENT_LIBS)

$(AGENT_UNIT): $(O)/tests/%: tests/unit/%.c $(O)/libagent.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(AGENT_INC) -I$(O)/gen $(CFLAGS) $(WARN) $(SANFLAGS) -std=gnu11 -MMD -MP \
		-Itests/unit -o $@ $< $(O)/libagent.a $(AGENT_DYN_LIBS)

$(BOTH_UNIT): $(O)/tests/%: tests/unit/%.c $(O)/libgr.a $(O)/libagent.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(AGENT_INC) -Itests/unit -o $@ $< $(O)/libgr.a $(O)/libagent.a $(CLIENT_LIBS)

$(O)/tests/%: tests/helpers/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(COMMON_OBJ) $(COMPAT_OBJ) $(CLIENT_LIBS)

$(HELPER_BIN): $(COMMON_OBJ) $(COMPAT_OBJ)

# scan_dump prints what scan_tree would sync: it needs the client library.
$(O)/tests/scan_dump: tests/helpers/scan_dump.c $(O)/libgr.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(O)/libgr.a $(CLIENT_LIBS)

# Fuzz targets: libFuzzer with clang, run for a short budget by make test.
# fuzz_proto: the frame reader alone.
PROTO_SRC := $(wildcard common/*.c common/proto/*.c)
$(O)/fuzz/%: tests/fuzz/%.c $(PROTO_SRC) | deps-check
	@mkdir -p $(@D)
	$(CLANG) $(CPPFLAGS) $(CLIENT_INC) -g -O1 -fsanitize=fuzzer,address,undefined -MMD -MP -o $@ $< $(PROTO_SRC)

FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(O)/fuzz/%)

# fuzz_host and fuzz_art feed the client's own readers of what the host
# sends: they link the client's code built again with clang, ASan, UBSan
# and the fuzzer's coverage (without -Werror: gcc's warnings are the build's).
FUZZ_CLIENT := fuzz_host fuzz_art fuzz_ignore
FUZZ_FLAGS := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_LIB_OBJ := $(CLIENT_SRC:%.c=$(O)/fuzz-obj/%.o) $(COMMON_SRC:%.c=$(O)/fuzz-obj/%.o)
$(O)/fuzz-obj/%.o: %.c | deps-check
	@mkdir -p $(@D)
	$(CLANG) $(CPPFLAGS) $(CLIENT_INC) -I$(O)/gen $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -std=gnu11 -MMD -MP -c $< -o $@

$(O)/fuzz-obj/libgr.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_CLIENT:%=$(O)/fuzz/%): $(O)/fuzz/%: tests/fuzz/%.c $(O)/fuzz-obj/libgr.a $(O)/agent_blob.o
	@mkdir -p $(@D)
	$(CLANG) $(CPPFLAGS) $(CLIENT_INC) -I$(O)/gen $(FUZZ_FLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< \
		$(O)/fuzz-obj/libgr.a $(O)/agent_blob.o $(CLIENT_LIBS)

kernels:
	$(MAKE) -C kernels

# Every test, under ASan and UBSan. The runner prints one closing line:
# "N passed, N failed, N skipped".
test: deps-check
	$(MAKE) all
	$(MAKE) SAN=1 all unit-bins
	tests/run.sh build-san

# The same against the client with compat/'s fallbacks (PORTABLE=1).
.PHONY: test-portable clean-portable
test-portable: deps-check
	$(MAKE) PORTABLE=1 SAN=1 all unit-bins
	tests/run.sh build-portable-san

clean: clean-portable
clean-portable:
	rm -rf build-portable build-portable-san

-include $(shell find build-portable build-portable-san -name '*.d' 2>/dev/null)

unit-bins: $(UNIT_BIN) $(HELPER_BIN) $(FUZZ_BIN)

# Quiet until the story starts: the build (and any package install before
# it) goes to $(O)/demo-build.log; only its tail shows, when it fails.
demo:
	@mkdir -p $(O) && printf 'demo: building gpurun (output in %s) ...\n' $(O)/demo-build.log && \
	if ! $(MAKE) --no-print-directory all >$(O)/demo-build.log 2>&1; then \
		tail -n 40 $(O)/demo-build.log >&2; \
		echo "demo: the build failed (the lines above end $(O)/demo-build.log)" >&2; exit 1; \
	fi
	@tests/demo.sh $(O)

bench: all $(HELPER_BIN)
	tests/bench/run.sh $(O)

# The randomized model tests at length. The job house: JOB_SEEDS seeds;
# the line for GPUs: QUEUE_SEEDS.
# The model-based sync test (tests/sync_model.py): odd seeds over the local
# transport, even ones over libssh2, two in every hundred with 100,000 files;
# the release build unless SAN=1. Then the pull model (tests/pull_model.py,
# t0413; `make test` runs seeds 1-4 of 14 steps): PULL_SEEDS seeds of
# PULL_STEPS steps, about 5 s a seed on a busy 2-core machine.
SEEDS ?= 1000
JOB_SEEDS ?= 500
QUEUE_SEEDS ?= 2000
PULL_SEEDS ?= 500
PULL_STEPS ?= 30
FUZZ_SECONDS ?= 300
soak: all $(HELPER_BIN)
	$(MAKE) SAN=1 all unit-bins
	GPURUN_MODEL_SEEDS=$(JOB_SEEDS) build-san/tests/test_job_house
	GPURUN_QUEUE_SEEDS=$(QUEUE_SEEDS) build-san/tests/test_job_queue
	rm -f $(O)/soak.log
	# The two halves (odd seeds local, even ones libssh2) run at once.
	export MODEL_SPLIT=1 MODEL_SEEDS=1-$(SEEDS) MODEL_BATCHES=20 MODEL_BIG_EVERY=100 \
		MODEL_LOG=$(CURDIR)/$(O)/soak.log GPURUN_BUILD=$(CURDIR)/$(O); \
	MODEL_ONLY=local bash tests/t/t0316-sync-model.sh & l=$$!; \
	MODEL_ONLY=ssh bash tests/t/t0316-sync-model.sh; s=$$?; \
	wait $$l && [ $$s = 0 ]
	PULL_MODEL_SEEDS=1-$(PULL_SEEDS) PULL_MODEL_STEPS=$(PULL_STEPS) GPURUN_BUILD=$(CURDIR)/$(O) \
		bash tests/t/t0413-pull-model.sh
	$(MAKE) fuzz-soak

# The fuzz targets at length (make soak ends with this), each from its
# seeds; a crash keeps its input as build-san/fuzz/crash-*.
fuzz-soak:
	$(MAKE) SAN=1 unit-bins
	for f in build-san/fuzz/fuzz_*; do \
		case $$f in *.*) continue ;; esac; \
		n=$$(basename $$f); c=$$(mktemp -d); \
		cp -r tests/fuzz/corpus/$${n#fuzz_}/. $$c/ 2>/dev/null; \
		$$f -timeout=20 -max_len=4096 -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=1024 \
			-artifact_prefix=build-san/fuzz/ -print_final_stats=1 $$c >build-san/fuzz/$$n.soak.log 2>&1 || \
			{ tail -n 40 build-san/fuzz/$$n.soak.log; rm -rf $$c; exit 1; }; \
		echo "fuzz $$n: $(FUZZ_SECONDS) s without a crash" \
			"($$(sed -n 's/^stat::number_of_executed_units: //p' build-san/fuzz/$$n.soak.log) runs)"; \
		rm -rf $$c; \
	done

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(O)/gpurun $(DESTDIR)$(PREFIX)/bin/gpurun
	install -D -m 644 completions/gpurun.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/gpurun
	install -D -m 644 completions/_gpurun $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_gpurun
	install -D -m 644 completions/gpurun.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/gpurun.fish
	install -D -m 644 cli/cmd/gpurun.1 $(DESTDIR)$(PREFIX)/share/man/man1/gpurun.1
	install -D -m 644 cli/cmd/gpurun.ini.5 $(DESTDIR)$(PREFIX)/share/man/man5/gpurun.ini.5

# completions/ holds what `gpurun completion SHELL` prints (the scripts live
# in cli/cmd/completion_scripts.c); tests/t/t0500-completion.sh fails if they differ.
completions: $(O)/gpurun
	$(O)/gpurun completion bash > completions/gpurun.bash
	$(O)/gpurun completion zsh > completions/_gpurun
	$(O)/gpurun completion fish > completions/gpurun.fish

# cli/cmd/gpurun.1 and gpurun.ini.5 are what `gpurun __man` and `gpurun __man 5`
# print, from the same tables as help; tests/t/t0511-man.sh fails if they
# differ, t0212 if an example in them (or in the README) does not load.
man: $(O)/gpurun
	$(O)/gpurun __man > cli/cmd/gpurun.1
	$(O)/gpurun __man 5 > cli/cmd/gpurun.ini.5

PREFIX ?= /usr/local

# `make print-VAR` prints a variable (tests/t/t0010-house.sh reads the
# include paths and the agent's hash this way).
print-%:
	@echo '$($*)'

clean:
	rm -rf build build-san $(XO)
	-$(MAKE) -C kernels clean

-include $(shell find build build-san $(XO) -name '*.d' 2>/dev/null)
