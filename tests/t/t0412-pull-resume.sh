#!/bin/bash
# A pull cut short resumes: the connection to a real sshd (libssh2,
# through the delay proxy at a fixed rate) is cut once 60 % of a
# checkpoint is on the client's disk; gpurun's own retry reconnects and
# fetches only the rest (bytes on the wire since the cut, counted from
# the proxy's last count before it, so an upper bound: <= 45 % of the
# file), and the file comes out whole, with no part file left. A file
# that changed on the host since its part was begun comes whole.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj RH=$TRASH/gpuhost-home
MB=${RESUME_MB:-64}
RATE=${RESUME_RATE:-16000000}

start_sshd gpuhost || exit 1
trust_sshd gpuhost
start_proxy cut "$SSHD_PORT_gpuhost" 0 "$RATE" && ssh_host_via viacut gpuhost "$PROXY_PORT_cut" || exit 1
write_ini "$P" viacut libssh2 proj
printf '[build]\ncommand =\n[artifacts]\npull = ckpt.bin\n[train]\ncommand = echo hi\n' >>"$P/gpurun.ini"

# size FILE: its size in bytes, 0 if missing.
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
bytes_now() { sleep 0.3; proxy_bytes cut; }

test_expect_success 'setup: a job with a checkpoint' '
	cd "$P" && id=$("$GPURUN" -q train --detach) && "$GPURUN" -q logs -f "$id" >/dev/null &&
	jd=$(ls -d "$RH"/.cache/gpurun/jobs/*/"$id") &&
	head -c $((MB << 20)) /dev/urandom >"$jd/ckpt.bin"
'

test_expect_success "a pull cut at 60 % resumes from there: the retry moves <= 45 % of the file" '
	cd "$P" && part="runs/$id/.ckpt.bin.gpurun-part" && want=$((MB << 20)) &&
	{ "$GPURUN" pull "$id" >out 2>err & } && pid=$! &&
	for i in $(seq 1 600); do [ "$(size "$part")" -ge $((want * 6 / 10)) ] && break; sleep 0.05; done &&
	have=$(size "$part") && test "$have" -ge $((want * 6 / 10)) && test "$have" -lt "$want" &&
	b0=$(proxy_bytes cut) && proxy_cut cut &&
	wait $pid && b1=$(bytes_now) &&
	say "cut with $have of $want bytes on disk; since the cut: $((b1 - b0)) bytes" &&
	test $((b1 - b0)) -le $((want * 45 / 100)) &&
	cmp "$jd/ckpt.bin" "runs/$id/ckpt.bin" &&
	test -z "$(find runs -name ".*.gpurun-part*")" && test_grep "pulled 1 artifact" err
'

test_expect_success 'a part begun from another version of the file: it comes whole' '
	cd "$P" && part="runs/$id/.ckpt.bin.gpurun-part" && rm -f "runs/$id/ckpt.bin" &&
	{ "$GPURUN" pull "$id" >out 2>err & } && pid=$! &&
	for i in $(seq 1 600); do [ "$(size "$part")" -ge $((MB << 19)) ] && break; sleep 0.05; done &&
	kill -9 $pid && { wait $pid; sleep 1; } && test -s "$part" && test -s "runs/$id/.ckpt.bin.gpurun-partinfo" &&
	head -c $((MB << 20)) /dev/urandom >"$jd/ckpt.bin" &&
	b0=$(bytes_now) && "$GPURUN" pull "$id" 2>err && b1=$(bytes_now) &&
	test $((b1 - b0)) -ge $((MB << 20)) &&
	cmp "$jd/ckpt.bin" "runs/$id/ckpt.bin" && test -z "$(find runs -name ".*.gpurun-part*")"
'

test_done
