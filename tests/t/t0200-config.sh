#!/bin/bash
# gpurun init and gpurun config end to end: the template and its refusal
# to overwrite, where each value came from (file:line, environment, -o,
# --host), one key, malformed files (exit 253 with file:line), and the
# hint to run 'gpurun init' where there is no gpurun.ini.
. "$(dirname "$0")/../lib.sh"

test_expect_success 'init writes a commented gpurun.ini and refuses a second time' '
	mkdir -p proj && cd proj &&
	"$GPURUN" init 2>err && test -f gpurun.ini && test_grep "wrote gpurun.ini" err &&
	test_grep "^\[remote\]$" gpurun.ini && test_grep "^path = ~/gpurun/proj$" gpurun.ini &&
	test_grep "^#host = " gpurun.ini && test_grep "^# how to reach the host" gpurun.ini &&
	cp gpurun.ini before &&
	test_expect_code 1 "$GPURUN" init 2>err &&
	test_grep "^gpurun: .gpurun.ini. already exists$" err && test_grep "^hint: " err &&
	test_cmp before gpurun.ini
'

test_expect_success 'the template loads back: each value is a default or from the file' '
	cd proj && "$GPURUN" config >out &&
	test_grep -E "^remote.path +~/gpurun/proj +gpurun.ini:[0-9]+$" out &&
	! grep -v "^#" out | grep -v -E " (default|gpurun.ini:[0-9]+)$"
'

test_expect_success 'init in a folder it does not recognise: no project'"'"'s commands, train says what to set' '
	cd proj && test_grep "Set \[train\] command" gpurun.ini &&
	test "$("$GPURUN" config build.command)" = "" && test "$("$GPURUN" config train.command)" = "" &&
	test_grep "^#command = python3 train.py" gpurun.ini && ! grep -q "kernels" gpurun.ini &&
	test_expect_code 253 "$GPURUN" --host local train 2>err &&
	test_grep "no \[train\] command to run" err
'

test_expect_success 'init in a kernels/ trainer writes its build, command and artifacts' '
	mkdir -p kproj/kernels && cd kproj && touch kernels/Makefile kernels/train.c &&
	"$GPURUN" init && test_grep "looks like a kernels/" gpurun.ini &&
	test "$("$GPURUN" config build.command)" = "make -C kernels" &&
	test_grep "^command = kernels/train " gpurun.ini &&
	test "$("$GPURUN" config artifacts.pull)" = "*.bin metrics.csv" &&
	test "$("$GPURUN" config train.persist)" = ""
'

test_expect_success 'init in a Python project without requirements: python3 train.py, no setup' '
	mkdir -p pyproj && cd pyproj && echo "print(1)" >train.py &&
	"$GPURUN" init && test "$("$GPURUN" config train.command)" = "python3 train.py" &&
	test "$("$GPURUN" config setup.command)" = "" && test "$("$GPURUN" config build.command)" = "" &&
	test "$("$GPURUN" config train.persist)" = "checkpoints/ .venv/" &&
	test_grep "(for this project; default: none)" gpurun.ini
'

test_expect_success 'config shows where each value came from: file:line, env, -o, --host' '
	mkdir -p o/sub && printf "[remote]\nhost = from-file\n[train]\ngpus = 2\n" >o/gpurun.ini &&
	cd o/sub &&
	"$GPURUN" config >out &&
	test_grep -E "^remote.host +from-file +../gpurun.ini:2$" out &&
	test_grep -E "^remote.transport +libssh2 +default$" out &&
	GPURUN_TRAIN_GPUS=0,1 "$GPURUN" config >out &&
	test_grep -E "^train.gpus +0,1 +env GPURUN_TRAIN_GPUS$" out &&
	"$GPURUN" -o train.stop_grace=3 --host flag-host config >out &&
	test_grep -E "^train.stop_grace +3 +-o$" out &&
	test_grep -E "^remote.host +flag-host +--host$" out &&
	"$GPURUN" --host flag-host -o remote.host=o-host config >out &&
	test_grep -E "^remote.host +o-host +-o$" out
'

test_expect_success 'config KEY prints the value alone; --json is valid JSON' '
	cd o && test "$("$GPURUN" config remote.host)" = from-file &&
	test "$("$GPURUN" config gpus)" = 2 &&
	"$GPURUN" config --json >j &&
	python3 -c "import json; d = json.load(open(\"j\"))[\"keys\"]; \
assert d[\"remote.host\"] == {\"value\": \"from-file\", \"origin\": \"gpurun.ini:2\"}, d; \
assert d[\"sync.exclude\"][\"value\"] == [\"runs/\"] and d[\"artifacts.pull\"][\"value\"] == [], d" &&
	test_expect_code 1 "$GPURUN" config remote.hots 2>err &&
	test_grep "^hint: did you mean .remote.host.?" err
'

test_expect_success 'config --json: bytes that are not UTF-8 become U+FFFD, still valid JSON' '
	mkdir -p u8 && cd u8 &&
	printf "[train]\ncommand = python \377\376 train.py \303\251\n" >gpurun.ini &&
	"$GPURUN" config --json >j &&
	python3 -c "import json; d = json.loads(open(\"j\", \"rb\").read().decode(\"utf-8\"))[\"keys\"]; \
v = d[\"train.command\"][\"value\"]; assert v == \"python \\ufffd\\ufffd train.py \\u00e9\", repr(v)"
'

test_expect_success 'a malformed gpurun.ini: exit 253 and file:line' '
	mkdir -p bad && cd bad &&
	printf "[remote]\nhost = ok\nhots = typo\n" >gpurun.ini &&
	test_expect_code 253 "$GPURUN" config 2>err &&
	test_grep "^gpurun: gpurun.ini:3: unknown key .hots. in \[remote\]$" err &&
	test_grep "^hint: did you mean .host.?" err &&
	printf "[remote]\nthis is not a key\n" >gpurun.ini &&
	test_expect_code 253 "$GPURUN" exec true 2>err &&
	test_grep "^gpurun: gpurun.ini:2: malformed line" err &&
	printf "[remote]\ntransport = carrier-pigeon\n" >gpurun.ini &&
	test_expect_code 253 "$GPURUN" config 2>err &&
	test_grep "gpurun.ini:2: invalid value .carrier-pigeon. for .transport. in \[remote\]: expected libssh2, openssh or local" err &&
	mkdir -p sub && cd sub && printf "[sync]\nwarn_size = big\n" >../gpurun.ini &&
	test_expect_code 253 "$GPURUN" config 2>err &&
	test_grep "^gpurun: ../gpurun.ini:2: invalid value .big. for .warn_size. in \[sync\]" err
'

test_expect_success 'bad environment variables and flags are named' '
	cd o &&
	(export GPURUN_REMOTE_CONNECT_TIMEOUT=soon && test_expect_code 253 "$GPURUN" config 2>err) &&
	test_grep "^gpurun: GPURUN_REMOTE_CONNECT_TIMEOUT: invalid value .soon." err &&
	test_expect_code 252 "$GPURUN" -o sync.warn_size=huge config 2>err &&
	test_grep "^gpurun: -o: invalid value .huge. for sync.warn_size" err &&
	test_expect_code 252 "$GPURUN" --host "-oProxyCommand=x" config 2>err &&
	test_grep "^gpurun: --host: invalid value" err
'

test_expect_success 'exec without a gpurun.ini: the hint says gpurun init' '
	mkdir -p none && cd none &&
	test_expect_code 253 "$GPURUN" exec true 2>err &&
	test_grep "^gpurun: no gpurun.ini in .*/none. or any parent folder$" err &&
	test_grep "^hint: run .gpurun init. to create one$" err
'

test_expect_success '-c names another file, and its folder is the project root' '
	mkdir -p elsewhere/p none2 && printf "[remote]\nhost = via-c\n" >elsewhere/p/x.ini &&
	cd none2 &&
	test "$("$GPURUN" -c ../elsewhere/p/x.ini config remote.host)" = via-c &&
	test "$("$GPURUN" -c ../elsewhere/p/x.ini config remote.path)" = "~/gpurun/p" &&
	test_expect_code 253 "$GPURUN" -c missing.ini config 2>err &&
	test_grep "missing.ini" err
'

test_done
