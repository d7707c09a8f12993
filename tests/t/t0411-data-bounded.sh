#!/bin/bash
# Memory is bounded by design on the way back: a pull of a large artifact
# and `gpurun logs` of a large log, over libssh2 to a real sshd, keep the
# client's and the agent's peak RSS far below what they carry (the client
# once held the whole stream: 1.2 GB for a 1 GiB pull). Peak RSS comes
# from /usr/bin/time (the client, and the extractor it waits for) and from
# the agent run under it (its cached binary wrapped; its helpers, which it
# waits for, count too).
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj RH=$TRASH/gpuhost-home
PULL_MB=${PULL_MB:-300}
LOG_MB=${LOG_MB:-120}
# Under ASan, freed blocks wait in its quarantine (256 MiB by default;
# libssh2 allocates a buffer per packet): keep it small so the numbers
# are gpurun's. The bound is 64 MiB plus the sanitizers' own share.
export ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=8
LIMIT_KB=${LIMIT_KB:-$((96 * 1024))}

if [ ! -x /usr/bin/time ]; then
	test_skip 'pull and logs of large data keep memory bounded' 'no /usr/bin/time'
	test_done
fi

start_sshd gpuhost || exit 1
trust_sshd gpuhost
write_ini "$P" gpuhost libssh2 proj
printf '[build]\ncommand =\n[artifacts]\npull = ckpt.bin\n[train]\ncommand = echo hi\n' >>"$P/gpurun.ini"

# peak NAME CMD...: run CMD with the client and agent peak RSS (KiB) in
# $TRASH/NAME.client and $TRASH/NAME.agent.
peak() {
	_n=$1; shift
	rm -f "$TRASH/agent-rss"
	/usr/bin/time -f %M -o "$TRASH/$_n.client" "$@" || return 1
	# The agent writes its number once the connection has closed.
	for _i in $(seq 1 100); do [ -s "$TRASH/agent-rss" ] && break; sleep 0.1; done
	tail -n1 "$TRASH/agent-rss" >"$TRASH/$_n.agent"
	say "$_n: client $(tail -n1 "$TRASH/$_n.client") KiB, agent $(cat "$TRASH/$_n.agent") KiB"
}
under() { [ "$(tail -n1 "$1")" -gt 0 ] && [ "$(tail -n1 "$1")" -lt "$2" ] || { say "$1: $(cat "$1") KiB, limit $2"; return 1; }; }

test_expect_success 'setup: a job, and the agent run under /usr/bin/time' '
	cd "$P" && id=$("$GPURUN" -q train --detach) && "$GPURUN" -q logs -f "$id" >/dev/null &&
	jd=$(ls -d "$RH"/.cache/gpurun/jobs/*/"$id") && test -d "$jd" &&
	agent_wrap "$RH" /usr/bin/time -f %M -o "$TRASH/agent-rss" &&
	"$GPURUN" -q status "$id" >/dev/null
'

test_expect_success "pull of a $PULL_MB MB checkpoint: client and agent RSS bounded, file intact" '
	cd "$P" && head -c $((PULL_MB << 20)) /dev/urandom >"$jd/ckpt.bin" &&
	peak pull "$GPURUN" -q pull "$id" &&
	cmp "$jd/ckpt.bin" "runs/$id/ckpt.bin" &&
	test -z "$(find runs -name "*.gpurun-part")" &&
	under "$TRASH/pull.client" "$LIMIT_KB" && under "$TRASH/pull.agent" "$LIMIT_KB"
'

test_expect_success "logs of a $LOG_MB MB log: client and agent RSS bounded, every byte" '
	cd "$P" && log="$jd/.gpurun/log" &&
	yes "step 123 loss 0.4567 lr 3e-4 tokens/s 123456 some more words to make a line" |
		head -c $((LOG_MB << 20)) >>"$log" &&
	peak logs "$GPURUN" logs "$id" >"$TRASH/log.out" &&
	cmp "$log" "$TRASH/log.out" &&
	under "$TRASH/logs.client" "$LIMIT_KB" && under "$TRASH/logs.agent" "$LIMIT_KB"
'

test_done
