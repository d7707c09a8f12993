#!/bin/bash
# A changed checkpoint comes back as a librsync delta against the copy
# already in runs/ (PROTOCOL.md, ART_PULL: deltas), through a real sshd
# (libssh2) and the delay proxy, which counts the bytes on the wire: a
# file pulled again after 10 % of it changed in place, then after bytes
# were inserted near its start and appended at its end, and a file of a
# later job whose basis is the earlier job's runs/ copy; a file pulled as
# a delta is signed from the cache the next time. Each time the
# content equals the host's and the wire carries a small part of the file.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj RH=$TRASH/gpuhost-home
MB=${DELTA_MB:-16}

start_sshd gpuhost || exit 1
trust_sshd gpuhost
start_proxy wire "$SSHD_PORT_gpuhost" 0 0 && ssh_host_via viawire gpuhost "$PROXY_PORT_wire" || exit 1
write_ini "$P" viawire libssh2 proj
printf '[build]\ncommand =\n[artifacts]\npull = ckpt.bin sub/*.bin\n[train]\ncommand = echo hi\n' >>"$P/gpurun.ini"

# edit FILE PCT SEED: overwrite PCT % of FILE in place, in 64 KiB pieces
# spread over it.
edit() {
	python3 - "$1" "$2" "$3" <<'PY'
import os, random, sys
path, pct, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
size = os.path.getsize(path)
piece = 65536
n = size * pct // 100 // piece
with open(path, "r+b") as f:
    for off in sorted(r.sample(range(size // piece), n)):
        f.seek(off * piece)
        f.write(os.urandom(piece))
PY
}
# The bytes a pull moved (both ways, at the proxy).
pulled() {
	b0=$(proxy_bytes wire) && "$GPURUN" pull "$1" 2>err && b1=$(proxy_bytes wire) &&
	moved=$((b1 - b0)) && say "pull moved $moved bytes for a $(stat -c %s "$2") byte file"
}

test_expect_success 'setup: a job with a checkpoint, pulled whole' '
	cd "$P" && a=$("$GPURUN" -q train --detach) && "$GPURUN" -q logs -f "$a" >/dev/null &&
	ja=$(ls -d "$RH"/.cache/gpurun/jobs/*/"$a") &&
	head -c $((MB << 20)) /dev/urandom >"$ja/ckpt.bin" &&
	pulled "$a" "$ja/ckpt.bin" && test "$moved" -ge $((MB << 20)) &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin"
'

test_expect_success '10 % changed in place: a delta, <= 20 % of the file on the wire' '
	cd "$P" && edit "$ja/ckpt.bin" 10 1 && ! cmp -s "$ja/ckpt.bin" "runs/$a/ckpt.bin" &&
	pulled "$a" "$ja/ckpt.bin" && test "$moved" -le $(((MB << 20) / 5)) &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin" && test_grep "pulled 1 artifact (.* sent, 1 as a delta)" err &&
	test -z "$(find runs -name ".*.gpurun-*")" &&
	test -z "$(ls -A "$ja/.gpurun/pull-sig" 2>/dev/null)"
'

test_expect_success 'changed again: the signature comes from the cache; a touched copy is read again' '
	cd "$P" && edit "$ja/ckpt.bin" 10 4 && GPURUN_TRACE=1 "$GPURUN" pull "$a" 2>err &&
	test_grep "uploaded the cached signature of ckpt.bin" err && test_grep "1 as a delta" err &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin" && test -n "$(ls .gpurun/pull-sigs)" &&
	touch "runs/$a/ckpt.bin" && edit "$ja/ckpt.bin" 10 5 && GPURUN_TRACE=1 "$GPURUN" pull "$a" 2>err &&
	test_grep "signed and uploaded ckpt.bin" err && test_grep "1 as a delta" err &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin"
'

test_expect_success 'bytes inserted near the start and appended: still a delta' '
	cd "$P" && { head -c 1000 /dev/urandom; cat "$ja/ckpt.bin"; head -c $((1 << 20)) /dev/urandom; } \
		>"$ja/ckpt.new" && mv "$ja/ckpt.new" "$ja/ckpt.bin" &&
	pulled "$a" "$ja/ckpt.bin" && test "$moved" -le $(((MB << 20) / 5 + (1 << 20))) &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin" && test_grep "1 as a delta" err
'

test_expect_success 'a later job writing the same path: the earlier job is the basis' '
	cd "$P" && mkdir -p "$ja/sub" && head -c $((MB << 19)) /dev/urandom >"$ja/sub/m.bin" &&
	"$GPURUN" -q pull "$a" && cmp "$ja/sub/m.bin" "runs/$a/sub/m.bin" &&
	b=$("$GPURUN" -q train --detach) && "$GPURUN" -q logs -f "$b" >/dev/null &&
	jb=$(ls -d "$RH"/.cache/gpurun/jobs/*/"$b") && mkdir -p "$jb/sub" &&
	cp "$ja/ckpt.bin" "$jb/ckpt.bin" && edit "$jb/ckpt.bin" 10 2 &&
	cp "$ja/sub/m.bin" "$jb/sub/m.bin" && edit "$jb/sub/m.bin" 10 3 &&
	pulled "$b" "$jb/ckpt.bin" && test "$moved" -le $(((MB << 20) * 3 / 10)) &&
	cmp "$jb/ckpt.bin" "runs/$b/ckpt.bin" && cmp "$jb/sub/m.bin" "runs/$b/sub/m.bin" &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin" && test_grep "2 as deltas" err
'

test_expect_success 'rewritten whole: it comes whole, and right' '
	cd "$P" && head -c $((MB << 20)) /dev/urandom >"$ja/ckpt.bin" &&
	pulled "$a" "$ja/ckpt.bin" && test "$moved" -ge $((MB << 20)) &&
	cmp "$ja/ckpt.bin" "runs/$a/ckpt.bin" && ! grep -q "as a delta" err
'

test_expect_success 'nothing changed: no plan round moves the file' '
	cd "$P" && pulled "$a" "$ja/ckpt.bin" && test "$moved" -le 200000
'

test_done
