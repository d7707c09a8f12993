#!/bin/bash
# The aarch64 agent end to end behind a real sshd: a "host" whose uname -m
# says aarch64 (a wrapper first on the session's PATH) is sent the static
# aarch64 agent, which runs under qemu-user: through binfmt_misc (then
# everything works: sync, train, logs, pull, stop), or, where binfmt_misc
# cannot be registered, wrapped in qemu-aarch64-static (the agent's own
# re-exec for a job then cannot work, so only what needs no job runs). A
# home shared by an x86_64 and an aarch64 host keeps one agent for each,
# and each host runs its own; an agent of another architecture than the
# host named is refused.
. "$(dirname "$0")/../lib.sh"

XAGENT=$TOP/build-aarch64/gpurun-agent
if [ "$(uname -m)" != x86_64 ]; then
	test_skip 'the aarch64 agent under qemu-user' "this test emulates aarch64 on x86_64, not on $(uname -m)"
	test_done
fi
if ! [ -x "$XAGENT" ]; then
	test_skip 'the aarch64 agent under qemu-user' "no $XAGENT (make builds it)"
	test_done
fi

# How this machine runs an aarch64 binary. T0112_QEMU=explicit takes the
# fallback even where binfmt_misc works (to test the fallback).
runs_arm() { "$XAGENT" --version >/dev/null 2>&1; }
MODE=
if [ "${T0112_QEMU:-}" != explicit ]; then
	if ! runs_arm && [ "$(id -u)" = 0 ] && command -v update-binfmts >/dev/null; then
		[ -e /proc/sys/fs/binfmt_misc/register ] ||
			mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null
		update-binfmts --enable qemu-aarch64 >/dev/null 2>&1
	fi
	runs_arm && MODE=binfmt
fi
if [ -z "$MODE" ] && command -v qemu-aarch64-static >/dev/null &&
	qemu-aarch64-static "$XAGENT" --version >/dev/null 2>&1; then
	MODE=explicit
fi
if [ -z "$MODE" ]; then
	test_skip 'the aarch64 agent under qemu-user' \
		'binfmt_misc cannot be registered and qemu-aarch64-static cannot run an aarch64 binary'
	test_done
fi
echo "# the aarch64 agent runs here through $([ $MODE = binfmt ] && echo binfmt_misc || echo qemu-aarch64-static named explicitly)"
NOBINFMT="the agent re-executes itself for a job (/proc/self/exe), which needs binfmt_misc"

HASH=$("$GPURUN" --version | sed -n 's/.*(agent \([0-9a-f]*\),.*/\1/p')
SH=$TRASH/shared-home C=$TRASH/shared-home/.cache/gpurun
mkdir -p "$TRASH/fakebin" "$SH/aproj" "$SH/xproj" "$TRASH/pa" "$TRASH/px"
printf '#!/bin/sh\ncase "$1" in -m) echo aarch64;; *) exec /bin/uname "$@";; esac\n' >"$TRASH/fakebin/uname"
chmod 755 "$TRASH/fakebin/uname"
# Two "hosts" on one home: arm answers uname -m with aarch64.
start_sshd arm "SetEnv PATH=$TRASH/fakebin:/usr/bin:/bin HOME=$SH" &&
	start_sshd x86 "SetEnv HOME=$SH" && trust_sshd arm && trust_sshd x86 || {
	echo "not ok - $TEST_NAME: start the test sshds"
	test_done
}
for _p in pa:arm:aproj px:x86:xproj; do
	IFS=: read -r _d _h _r <<<"$_p"
	write_ini "$TRASH/$_d" "$_h" libssh2 "$_r"
	printf '[build]\ncommand =\n[train]\ncommand = sh job.sh\n[artifacts]\npull = out.txt\n' >>"$TRASH/$_d/gpurun.ini"
done
stop_all() {
	(cd "$TRASH/pa" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
A=$C/agent-$HASH-aarch64
if [ $MODE = explicit ]; then
	# The first connection uploads the agent (without binfmt_misc it
	# cannot start); from then on the file runs qemu on the real one.
	(cd "$TRASH/pa" && "$GPURUN" exec true >/dev/null 2>&1)
	test -f "$A" && agent_wrap "$SH" qemu-aarch64-static || {
		echo "not ok - $TEST_NAME: upload the aarch64 agent and wrap it in qemu-aarch64-static"
		test_done
	}
	A=$A.real
fi

test_expect_success 'the aarch64 host gets the static aarch64 agent, cached under its architecture' '
	cd "$TRASH/pa" && "$GPURUN" -v exec -- echo hi >out 2>err && test_grep -x hi out &&
	{ [ $MODE = explicit ] || test_grep "uploading agent $HASH for aarch64" err; } &&
	file "$A" >f && test_grep "ARM aarch64" f && test_grep "statically linked" f &&
	cmp "$A" "$XAGENT" &&
	"$GPURUN" doctor >d 2>&1 && test_grep "agent .*$HASH on aarch64" d
'

if [ $MODE = binfmt ]; then
test_expect_success 'sync, train, logs, pull on the aarch64 agent' '
	cd "$TRASH/pa" && printf "echo start\necho result >\"\$GPURUN_JOB_DIR/out.txt\"\necho done\n" >job.sh &&
	"$GPURUN" -q sync && cmp job.sh "$SH/aproj/job.sh" &&
	"$GPURUN" train >out 2>err && test_grep -x start out && test_grep -x done out &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && test "$(cat runs/$id/out.txt)" = result &&
	"$GPURUN" logs "$id" >log && test_grep -x done log &&
	"$GPURUN" pull "$id" 2>err && test_grep "up to date" err
'

test_expect_success 'stop: the job'"'"'s supervisor is the aarch64 agent under qemu, and stop ends the job' '
	cd "$TRASH/pa" && id=$("$GPURUN" -q -o train.command="echo ready; sleep 3$$" train --detach) &&
	for i in $(seq 1 100); do "$GPURUN" logs "$id" 2>/dev/null | grep -q ready && break; sleep 0.1; done &&
	"$GPURUN" logs "$id" | test_grep -x ready &&
	emu=0 && for p in $(pgrep -f "agent-$HASH-aarch64"); do
		case $(readlink /proc/$p/exe) in *qemu*) emu=$((emu + 1)) ;; esac
	done && test $emu -ge 1 &&
	"$GPURUN" stop "$id" 2>err && "$GPURUN" status "$id" >st && test_grep "^$id  stopped " st &&
	! pgrep -f "^sleep 3$$\$"
'
else
test_skip 'sync, train, logs, pull on the aarch64 agent' "$NOBINFMT"
test_skip 'stop on the aarch64 agent' "$NOBINFMT"
test_expect_success 'sync on the aarch64 agent (qemu-aarch64-static)' '
	cd "$TRASH/pa" && echo x >f.txt && "$GPURUN" -q sync && cmp f.txt "$SH/aproj/f.txt"
'
fi

test_expect_success 'a home shared by an x86_64 and an aarch64 host keeps both agents; each runs its own' '
	cd "$TRASH/px" && "$GPURUN" -v exec true 2>err &&
	test_grep "uploading agent $HASH for x86_64" err &&
	test -x "$C/agent-$HASH-x86_64" && cmp "$C/agent-$HASH-x86_64" "$BUILD/gpurun-agent" &&
	file "$C/agent-$HASH-x86_64" >f && test_grep "x86-64" f && test -f "$A" &&
	"$GPURUN" doctor >d 2>&1 && test_grep "agent .*$HASH on x86_64" d &&
	for i in 1 2; do
		(cd "$TRASH/pa" && "$GPURUN" -v exec true) 2>err && ! grep "uploading agent" err &&
		(cd "$TRASH/px" && "$GPURUN" -v exec true) 2>err && ! grep "uploading agent" err || return 1
	done &&
	(cd "$TRASH/pa" && "$GPURUN" doctor) >d 2>&1 && test_grep "agent .*$HASH on aarch64" d
'

test_expect_success 'an agent that runs as another architecture than the host named is refused' '
	a=$C/agent-$HASH-aarch64 && mv "$a" "$a.keep" &&
	printf "#!/bin/sh\nexec %s \"\$@\"\n" "$BUILD/gpurun-agent" >"$a" && chmod 755 "$a" &&
	(cd "$TRASH/pa" && GPURUN_AGENT_UNCHECKED=1 "$GPURUN" exec true) 2>err; rc=$?
	mv -f "$a.keep" "$a" && test $rc != 0 &&
	test_grep "runs as .x86_64., but the host said it is .aarch64." err
'

test_done
