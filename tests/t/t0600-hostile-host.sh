#!/bin/bash
# A host that lies (issue 11): the real agent behind a proxy that rewrites
# its answers (tests/helpers/hostile_agent.py) hands gpurun job ids that
# lead out of runs/ ('..', absolute, '/', NUL, newline, ESC), OSC 52 and
# friends in log bytes cut one byte per frame, escapes in states and GPU
# names, container runtimes, images and names that no agent sends, a
# doctor's container check outside its words, counts and frame sizes past any payload, a flood of frames nobody
# asked for, archives larger than announced, and a pull delta the client
# never asked for (more lying deltas: tests/unit/test_art_delta.c). Each case checks what
# reached the disk and, on a real terminal (tests/helpers/pty_run.py),
# the bytes the user would have seen.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
PTY="python3 $TOP/tests/helpers/pty_run.py"
HASH=$("$GPURUN" --version | sed -n 's/.*(agent \([0-9a-f]*\),.*/\1/p')
# The "agent" the bootstrap runs is the proxy; it runs the real one.
mkdir -p "$HOME/.cache/gpurun"
cp "$TOP/tests/helpers/hostile_agent.py" "$HOME/.cache/gpurun/agent-$HASH-$(uname -m)"
chmod 755 "$HOME/.cache/gpurun/agent-$HASH-$(uname -m)"
export HOSTILE_REAL_AGENT=$BUILD/gpurun-agent
# The hostile agent is not the file gpurun uploads: run it all the same.
export GPURUN_AGENT_UNCHECKED=1
unset HOSTILE
hex() { printf '%b' "$1" | od -An -tx1 | tr -d ' \n'; }
# A log that tries every way to command the terminal, with text between.
LOGCMD='printf "step 1\n\033]52;c;ZXZpbA==\a\033]0;pwned\033\\\\\033[1;32mgreen\033[0m \342\234\223\n\033P+q544e\033\\\\\033[2J\033[?1049hdone\n"'
write_ini "$P" local local "$R"
cat >> "$P/gpurun.ini" <<INI
[build]
command =
[train]
command = echo host-data > "\$GPURUN_JOB_DIR/out.txt"; $LOGCMD
[artifacts]
pull = out.txt
interval = 0
INI
# no_escape FILE: no ESC, and no C1 control, reached the terminal.
no_escape() { ! grep -q "$(printf '\033')" "$1" && ! grep -qP '\xc2[\x80-\x9f]' "$1"; }
# disk_state: what an id leading out of runs/ could have touched.
disk_state() {
	(cd "$TRASH" && find victim proj/runs "$HOME" -path "$HOME/.cache" -prune -o -print | sort)
	ls -d /tmp/abs-$$* 2>/dev/null; true
}

test_expect_success 'an honest job through the proxy: trained, pulled, logged exactly' '
	cd "$P" && "$GPURUN" -q train >log.out &&
	J=$(head -n1 .gpurun/jobs | cut -f1) && echo "$J" >"$TRASH/J" &&
	test_grep -x host-data "runs/$J/out.txt" &&
	eval "$LOGCMD" >want && test_cmp want log.out
'
J=$(cat "$TRASH/J" 2>/dev/null)
mkdir -p "$TRASH/victim" && echo mine >"$TRASH/victim/.bashrc"

# Ids a compromised host might send, as hex (printf %b escapes).
ids='../../victim
/tmp/abs-'$$'
20261122/000000-abcd
2026112\n-000000-abcd
20261122-000000-ab\033]0;x\a
20261122-000000-abc'
for raw in $ids; do
	test_expect_success "a job id of '$raw' is refused by pull, logs, status, stop and train" '
		disk_state >"$TRASH/before" &&
		export HOSTILE=id HOSTILE_ID_HEX=$(hex "$raw") && cd "$P" && cp .gpurun/jobs jobs.before &&
		test_expect_code 251 "$GPURUN" pull 2>err && test_grep "the host sent an invalid job id" err &&
		test_expect_code 251 "$GPURUN" logs 2>err && test_grep "invalid job id" err &&
		test_expect_code 251 "$GPURUN" status 2>err && test_grep "invalid job id" err &&
		test_expect_code 251 "$GPURUN" stop 2>err && test_grep "invalid job id" err &&
		test_expect_code 251 "$GPURUN" train 2>err && test_grep "invalid job id" err &&
		unset HOSTILE && disk_state >"$TRASH/after" && test_cmp "$TRASH/before" "$TRASH/after" &&
		test_cmp jobs.before .gpurun/jobs && test_grep -x mine "$TRASH/victim/.bashrc"
	'
done

test_expect_success 'a job id with a NUL byte is a protocol error' '
	cd "$P" && export HOSTILE=id HOSTILE_ID_HEX=3230323631313232002e2e2f2e2e2f78 &&
	test_expect_code 251 "$GPURUN" pull 2>err && test_grep "protocol error" err &&
	unset HOSTILE && ! test -e "$P/runs/20261122"
'

test_expect_success 'the message naming a bad id shows its ESC escaped, on a terminal' '
	cd "$P" && export HOSTILE=id HOSTILE_ID_HEX=$(hex "20261122-000000-ab\033]52;c;QUJD\a") &&
	test_expect_code 251 $PTY tty.out "$GPURUN" pull && unset HOSTILE &&
	test_grep "invalid job id .20261122-000000-ab\\\\x1b\]52;c;QUJD\\\\x07" tty.out && no_escape tty.out
'

test_expect_success 'logs on a terminal: OSC 52, titles, DCS and screen clears dropped, colour kept' '
	cd "$P" && export HOSTILE=log-bytes && $PTY tty.out "$GPURUN" logs "$J" && unset HOSTILE &&
	test_grep "step 1" tty.out && test_grep "done" tty.out &&
	grep -q "$(printf "\033\\[1;32mgreen\033\\[0m \342\234\223")" tty.out &&
	! grep -q "$(printf "\033]")" tty.out && ! grep -q "$(printf "\033P")" tty.out &&
	! grep -q "$(printf "\033\\[2J")" tty.out && ! grep -q "$(printf "\033\\[?")" tty.out &&
	! grep -q "ZXZpbA" tty.out && ! grep -q pwned tty.out
'

test_expect_success 'logs into a file or pipe: every byte as the job wrote it, even cut one per frame' '
	cd "$P" && export HOSTILE=log-bytes && "$GPURUN" logs "$J" >file.out &&
	"$GPURUN" logs "$J" | cat >pipe.out && unset HOSTILE &&
	eval "$LOGCMD" >want && test_cmp want file.out && test_cmp want pipe.out
'

test_expect_success 'logs --raw passes everything to a terminal' '
	cd "$P" && $PTY tty.out "$GPURUN" logs --raw "$J" &&
	grep -q "$(printf "\033]52;c;ZXZpbA==")" tty.out
'

test_expect_success 'train streams the log through the filter on a terminal' '
	cd "$P" && export HOSTILE=log-bytes && $PTY tty.out "$GPURUN" train && unset HOSTILE &&
	test_grep "step 1" tty.out && grep -q "$(printf "\033\\[1;32mgreen")" tty.out &&
	! grep -q "$(printf "\033]")" tty.out && ! grep -q "$(printf "\033P")" tty.out
'

test_expect_success 'exec: filtered on a terminal, exact in a pipe' '
	cd "$P" && $PTY tty.out "$GPURUN" exec -- sh -c "$LOGCMD" &&
	test_grep "step 1" tty.out && ! grep -q "$(printf "\033]")" tty.out &&
	"$GPURUN" exec -- sh -c "$LOGCMD" >pipe.out && eval "$LOGCMD" >want && test_cmp want pipe.out
'

test_expect_success 'status: escapes in a state and a GPU name are shown escaped; --json keeps them' '
	cd "$P" && printf "#!/bin/sh\ncase \$1 in --query-gpu=*) printf \"0, GPU-1, Evil\\\\033]0;t\\\\007GPU, 0, 1, 100\\\\n\";; esac\n" >"$TRASH/smi" &&
	chmod +x "$TRASH/smi" && export GPURUN_NVIDIA_SMI=$TRASH/smi &&
	export HOSTILE=state HOSTILE_STATE_HEX=$(hex "run\033]52;c;QUJD\aning") &&
	$PTY tty.out "$GPURUN" status && "$GPURUN" status --json >js &&
	unset HOSTILE GPURUN_NVIDIA_SMI && no_escape tty.out &&
	test_grep "run\\\\x1b\]52;c;QUJD\\\\x07ning" tty.out && test_grep "Evil\\\\x1b\]0;t" tty.out &&
	python3 -c "import json; d=json.load(open(\"js\")); assert d[\"jobs\"][0][\"state\"]==\"run\x1b]52;c;QUJD\x07ning\", d; assert d[\"gpus\"][0][\"name\"]==\"Evil\x1b]0;t\x07GPU\", d" &&
	! grep -q "$(printf "\033")" js
'

test_expect_success 'a job phase with escapes reaches the terminal escaped: train, logs -f, stop' '
	cd "$P" && export HOSTILE=field HOSTILE_FIELD=phase HOSTILE_FIELD_HEX=$(hex "bu\033]52;c;QUJD\ald") &&
	{ $PTY tty.out "$GPURUN" train -- false; true; } && J2=$(head -n1 .gpurun/jobs | cut -f1) &&
	{ $PTY tty2.out "$GPURUN" logs -f "$J2"; true; } && { $PTY tty3.out "$GPURUN" stop "$J2"; true; } &&
	unset HOSTILE HOSTILE_FIELD &&
	for f in tty.out tty2.out tty3.out; do
		no_escape $f && test_grep "bu\\\\x1b\]52;c;QUJD\\\\x07ld failed with status 1" $f || return 1
	done
'

test_expect_success 'a container runtime or image in a record that no agent sends is refused' '
	cd "$P" && export HOSTILE=field HOSTILE_FIELD=runtime HOSTILE_FIELD_HEX=$(hex "podman\033]0;t\a") &&
	test_expect_code 251 $PTY tty.out "$GPURUN" status "$J" && no_escape tty.out &&
	test_grep "unknown container runtime .podman\\\\x1b\]0;t\\\\x07" tty.out &&
	export HOSTILE_FIELD=image HOSTILE_FIELD_HEX=$(hex "img\033]52;c;QUJD\a") &&
	test_expect_code 251 $PTY tty.out "$GPURUN" status && no_escape tty.out &&
	test_grep "invalid image .img\\\\x1b\]52;c;QUJD" tty.out &&
	export HOSTILE_FIELD_HEX=$(hex "--privileged") &&
	test_expect_code 251 "$GPURUN" logs "$J" 2>err && test_grep "invalid image" err &&
	export HOSTILE_FIELD_HEX=$(hex "localhost/ok:1") && "$GPURUN" status "$J" >out &&
	unset HOSTILE HOSTILE_FIELD && test_grep -E "^image +localhost/ok:1 " out
'

test_expect_success 'stop: a container name no runtime allows is refused, never printed raw' '
	cd "$P" && export HOSTILE=ctr-name HOSTILE_CTR_HEX=$(hex "gpurun-x\033]52;c;QUJD\a") &&
	test_expect_code 251 $PTY tty.out "$GPURUN" stop "$J" && no_escape tty.out &&
	test_grep "invalid container name .gpurun-x\\\\x1b\]52;c;QUJD" tty.out &&
	export HOSTILE_CTR_HEX=$(hex "-rf") && test_expect_code 251 "$GPURUN" stop "$J" 2>err &&
	test_grep "invalid container name" err &&
	export HOSTILE_CTR_HEX=$(hex "gpurun-$J") && "$GPURUN" stop "$J" 2>err && unset HOSTILE &&
	test_grep "stopped and removed container gpurun-$J" err
'

test_expect_success 'doctor: a container check answer outside its words is refused; escapes shown escaped' '
	cd "$P" && export HOSTILE=ctr-check HOSTILE_CTR_RT_HEX=$(hex "podman\033[2J") HOSTILE_CTR_GPU_HEX=$(hex cdi) &&
	{ $PTY tty.out "$GPURUN" -o container.image=localhost/x:1 doctor || :; } && no_escape tty.out &&
	test_grep -E "FAIL +container +the host sent a malformed CONTAINER_CHECK answer" tty.out &&
	export HOSTILE_CTR_RT_HEX=$(hex podman) HOSTILE_CTR_GPU_HEX=$(hex "evil") &&
	{ $PTY tty.out "$GPURUN" -o container.image=localhost/x:1 doctor || :; } && no_escape tty.out &&
	test_grep "malformed CONTAINER_CHECK answer" tty.out &&
	export HOSTILE_CTR_GPU_HEX=$(hex none) &&
	{ $PTY tty.out "$GPURUN" -o container.image=localhost/x:1 doctor || :; } && no_escape tty.out &&
	test_grep -E "ok +container +podman 4.3.1\\\\x1b\[2J \(/usr/bin/podman\\\\x1b\]0;pwned\\\\x07\)" tty.out
	rc=$?; unset HOSTILE; return $rc
'

test_expect_success 'a count past the payload is refused at once (no 4-billion-entry allocation)' '
	cd "$P" && export HOSTILE=count && test_expect_code 251 "$GPURUN" status 2>err && unset HOSTILE &&
	test_grep "announced 4294967295 jobs" err
'

test_expect_success 'a GPU count past the payload is refused, before any allocation by it' '
	cd "$P" && export HOSTILE=gpu-count && test_expect_code 251 "$GPURUN" status 2>err && unset HOSTILE &&
	test_grep -i "protocol" err && ! test_grep -i "memory" err
'

test_expect_success 'a frame header announcing 4 GiB is refused' '
	cd "$P" && export HOSTILE=bigframe && test_expect_code 251 "$GPURUN" pull 2>err && unset HOSTILE &&
	test_grep -i "frame" err
'

test_expect_success 'a flood of frames nobody asked for stops at 256 MiB held' '
	cd "$P" && export HOSTILE=flood HOSTILE_FLOOD_MB=300 &&
	test_expect_code 251 "$GPURUN" pull 2>err && unset HOSTILE &&
	test_grep "more than 256 MiB" err
'

test_expect_success 'an archive larger than announced is refused; nothing is written' '
	cd "$P" && rm -rf "runs/$J" && export HOSTILE=art-bytes HOSTILE_ART_BYTES=3 &&
	test_expect_code 250 "$GPURUN" pull "$J" 2>err && unset HOSTILE &&
	test_grep "larger than the host announced" err &&
	test -z "$(ls -A "runs/$J")"
'

test_expect_success 'more files than announced are refused' '
	cd "$P" && rm -rf "runs/$J" && export HOSTILE=art-bytes HOSTILE_ART_BYTES=100 HOSTILE_ART_FILES=0 &&
	test_expect_code 250 "$GPURUN" pull "$J" 2>err && unset HOSTILE HOSTILE_ART_FILES &&
	test_grep "announced 0 files" err && test -z "$(ls -A "runs/$J")"
'

test_expect_success 'a pull announced past the free space is refused, with the numbers, before any write' '
	cd "$P" && rm -rf "runs/$J" && export HOSTILE=art-bytes HOSTILE_ART_BYTES=$((1 << 60)) &&
	test_expect_code 250 "$GPURUN" pull "$J" 2>err && unset HOSTILE &&
	test_grep "TiB needed, and .* free of .*; \[artifacts\] min_free keeps 5% (.*) free" err &&
	test_grep "hint: free some space" err && test -z "$(ls -A "runs/$J")"
'

test_expect_success 'a delta the pull did not ask for is refused; an honest retry brings the files' '
	cd "$P" && jd=$(ls -d "$HOME"/.cache/gpurun/jobs/*/"$J") &&
	head -c 2097152 /dev/urandom >"$jd/a.bin" &&
	"$GPURUN" -q -o artifacts.pull=a.bin pull "$J" && cmp "$jd/a.bin" "runs/$J/a.bin" &&
	cp "$jd/a.bin" "$jd/b.bin" &&
	printf x | dd of="$jd/a.bin" bs=1 seek=1000 conv=notrunc 2>/dev/null &&
	export HOSTILE=art-sig HOSTILE_ART_SIG_PATH=b.bin &&
	! "$GPURUN" -o "artifacts.pull=*.bin" pull "$J" 2>err && unset HOSTILE &&
	test_grep "a delta this pull did not ask for" err && ! test -e "runs/$J/b.bin" &&
	test -z "$(find runs -name ".*.gpurun-part*")" &&
	"$GPURUN" -q -o "artifacts.pull=*.bin" pull "$J" &&
	cmp "$jd/a.bin" "runs/$J/a.bin" && cmp "$jd/b.bin" "runs/$J/b.bin" && rm -f "$jd"/*.bin
'

test_expect_success '[artifacts] min_free: an honest pull that would leave too little free is refused' '
	cd "$P" && rm -rf "runs/$J" &&
	used=$(df --output=pcent "$P" | tail -n1 | tr -dc 0-9) &&
	if test "$used" -lt 10; then echo "disk nearly empty: 90% is free"; else
		test_expect_code 250 "$GPURUN" -o artifacts.min_free=90 pull "$J" 2>err &&
		test_grep "keeps 90%" err && ! test -e "runs/$J/out.txt"; fi &&
	"$GPURUN" -q pull "$J" && test_grep -x host-data "runs/$J/out.txt"
'

test_expect_success 'every request has a bound: an agent that never answers fails each command in GPURUN_IO_TIMEOUT' '
	cd "$P" && export HOSTILE=mute GPURUN_IO_TIMEOUT=2 &&
	for c in "status" "status $J" "stop $J" "rm $J" "prune --dry-run" "pull $J" "exec true" "doctor" "logs $J" "logs -f $J"; do
		t0=$(date +%s) && { timeout 60 "$GPURUN" $c >out 2>err; rc=$?; } &&
		el=$(( $(date +%s) - t0 )) && echo "$c: rc=$rc in $el s" &&
		test $rc != 0 && test $rc != 124 && test $el -lt 20 &&
		cat out err >both && grep -E "(sent and took nothing|answered nothing) for 2 s" both || { unset HOSTILE GPURUN_IO_TIMEOUT; return 1; }
	done
	unset HOSTILE GPURUN_IO_TIMEOUT && "$GPURUN" status "$J" >out && test_grep "^$J " out
'

# A stopped agent failed a sync after a minute, not GPURUN_IO_TIMEOUT:
# the bootstrap and HELLO had a fixed 60 s of their own (sync model,
# local seed 3 under --soak settings).
test_expect_success 'an agent that never starts, or never says HELLO, fails in GPURUN_IO_TIMEOUT' '
	cd "$P" && for h in mute-start mute-hello; do
		t0=$(date +%s) && { HOSTILE=$h GPURUN_IO_TIMEOUT=2 timeout 60 "$GPURUN" status >out 2>err; rc=$?; } &&
		el=$(( $(date +%s) - t0 )) && echo "$h: rc=$rc in $el s" && cat err &&
		test $rc != 0 && test $rc != 124 && test $el -lt 20 &&
		test_grep "nothing for 2 s" err || return 1
	done
'

test_expect_success 'a busy agent sending keepalives is waited for, past GPURUN_IO_TIMEOUT' '
	cd "$P" && export HOSTILE=slow HOSTILE_SLOW_S=4 GPURUN_IO_TIMEOUT=2 &&
	timeout 60 "$GPURUN" status "$J" >out 2>err; rc=$?; unset HOSTILE HOSTILE_SLOW_S GPURUN_IO_TIMEOUT;
	test $rc = 0 && test_grep "^$J " out
'

test_expect_success 'train answers Ctrl-C, SIGTERM and SIGHUP at once while the host starts the job' '
	cd "$P" && export HOSTILE=slow-start HOSTILE_SLOW_S=30 HOSTILE_MARK=$TRASH/holding &&
	for sig in INT TERM HUP; do
		rm -f err "$HOSTILE_MARK" && { "$GPURUN" train </dev/null >out 2>err & } && tpid=$! &&
		for i in $(seq 1 300); do test -e "$HOSTILE_MARK" && break; sleep 0.1; done &&
		test -e "$HOSTILE_MARK" && sleep 0.5 && t0=$(date +%s) && kill -$sig $tpid &&
		{ wait $tpid; rc=$?; } && el=$(( $(date +%s) - t0 )) && echo "$sig: rc=$rc in $el s" && cat err &&
		test $el -le 3 && test $rc = 249 &&
		test_grep "while the host was starting the job: detached; the host goes on starting it" err ||
		{ unset HOSTILE HOSTILE_MARK; return 1; }
	done
	unset HOSTILE HOSTILE_SLOW_S HOSTILE_MARK
'

test_done
