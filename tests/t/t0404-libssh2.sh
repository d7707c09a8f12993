#!/bin/bash
# Jobs over the default transport (libssh2, in process) to a real sshd
# behind the delay proxy: status passthrough, a follower that reconnects
# after the proxy cuts it (every line once), and a job that outlives
# kill -9 of gpurun. And an sshd that keys again every 1 MiB
# (RekeyLimit): a sync up and a pull down of 6 MiB cross several new keys
# each way, with the batched AES-CTR of cli/ssh/ssh_ctr.c and without it.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
RH=$TRASH/gpuhost-home
wait_grep() {
	for _i in $(seq 1 $((${3:-20} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
ini() {
	write_ini "$P" viaproxy libssh2 proj
	printf '[build]\ncommand =\n[train]\ncommand = %s\nstop_grace = 1\n' "$1" >>"$P/gpurun.ini"
}
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

test_expect_success 'sshd behind the delay proxy (5 ms each way)' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy wan "$SSHD_PORT_gpuhost" 5 && ssh_host_via viaproxy gpuhost "$PROXY_PORT_wan" &&
	mkdir -p "$P" "$RH/proj" &&
	printf "i=1; while [ \$i -le \${1:-100} ]; do echo \"line \$i\"; i=\$((i+1)); sleep \${2:-0.05}; done; exit \${3:-0}\n" >"$RH/proj/count.sh"
'

test_expect_success 'libssh2: train streams the log and passes the status through' '
	cd "$P" && ini "sh count.sh 5 0 7" &&
	test_expect_code 7 "$GPURUN" train >out 2>err &&
	seq 1 5 | sed "s/^/line /" >want && test_cmp want out
'

test_expect_success 'libssh2: logs -f through two cuts shows every line once' '
	cd "$P" && ini "sh count.sh 120 0.04 4" &&
	id=$("$GPURUN" -q train --detach) && rm -f out err &&
	{ "$GPURUN" logs -f "$id" >out 2>err & } && lpid=$! &&
	wait_grep "line 20\$" out && proxy_cut wan && wait_grep reconnected err &&
	wait_grep "line 60\$" out && proxy_cut wan &&
	{ wait $lpid; rc=$?; } && test $rc = 4 &&
	seq 1 120 | sed "s/^/line /" >want && test_cmp want out
'

test_expect_success 'libssh2: the job outlives kill -9 of gpurun' '
	cd "$P" && ini "sh count.sh 30 0.05 0" && rm -f out &&
	{ "$GPURUN" train >out 2>err & } && gpid=$! &&
	wait_grep "line 3\$" out && kill -9 $gpid && { wait $gpid || :; } &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test_expect_code 0 "$GPURUN" logs -f "$id" >all &&
	seq 1 30 | sed "s/^/line /" >want && test_cmp want all
'

# libssh2 1.10 leaks the server's host key blob (51 bytes for ed25519) at
# every key exchange after the first: it allocates session->server_hostkey
# again without freeing it (kex.c). Not ours to free; LeakSanitizer is told
# so for this case only.
printf 'leak:libssh2.so.1\n' >"$TRASH/libssh2-rekey.supp"
test_expect_success 'libssh2: new keys every 1 MiB, batched AES-CTR: sync and pull are byte-exact' '
	export LSAN_OPTIONS=suppressions=$TRASH/libssh2-rekey.supp &&
	start_sshd rekeyhost "RekeyLimit 1M
LogLevel DEBUG1" && trust_sshd rekeyhost &&
	R=$TRASH/rekey && mkdir -p "$R" && cd "$R" &&
	write_ini "$R" rekeyhost libssh2 rk &&
	printf "[build]\ncommand =\n[artifacts]\npull = out.bin\n[train]\ncommand = cp data.bin out.bin\n" >>gpurun.ini &&
	head -c 6291456 /dev/urandom >data.bin &&
	{ "$GPURUN" doctor >log 2>&1 || true; } && test_grep "cipher aes[0-9]*-ctr (batched)" log &&
	"$GPURUN" -q sync && cmp data.bin "$TRASH/rekeyhost-home/rk/data.bin" &&
	"$GPURUN" -q train >/dev/null && rid=$(head -n1 .gpurun/jobs | cut -f1) &&
	cmp data.bin "runs/$rid/out.bin" &&
	rm -rf runs && GPURUN_SSH_CTR_BATCH=0 "$GPURUN" -q pull "$rid" && cmp data.bin "runs/$rid/out.bin" &&
	{ GPURUN_SSH_CTR_BATCH=0 "$GPURUN" doctor >log 2>&1 || true; } && test_grep "cipher aes[0-9]*-ctr, " log &&
	rm -rf runs && "$GPURUN" -q pull "$rid" && cmp data.bin "runs/$rid/out.bin" &&
	n=$(grep -c "rekeying\|SSH2_MSG_KEXINIT sent" "$TRASH/sshd-rekeyhost/sshd.log") &&
	echo "key exchanges in the sshd log: $n" && test "$n" -ge 12
'
unset LSAN_OPTIONS

test_done
