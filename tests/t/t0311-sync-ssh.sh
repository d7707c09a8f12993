#!/bin/bash
# gpurun sync to a real sshd on loopback over the default (libssh2)
# transport, through the delay proxy so the bytes on the wire are counted
# where the network is: tree equality, the no-op costing at most 2 KB
# beyond the connection, a large file sent as a small delta (with the
# signature cached here, then asked of the host), a large file changed on
# the host behind gpurun's back.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/gpuhost-home/proj

gen_tree() {
	python3 - "$1" "$2" "$3" <<'PY'
import os, random, sys
root, rnd, n = os.fsencode(sys.argv[1]), random.Random(int(sys.argv[2])), int(sys.argv[3])
names = [b'a', b'b c', b'n\nl', b'\xff', 'caf\u00e9'.encode(), b'x.py']
dirs = [b'']
os.makedirs(root, exist_ok=True)
for i in range(n):
    parent = rnd.choice(dirs)
    rel = os.path.join(parent, rnd.choice(names) + str(i).encode()) if parent else rnd.choice(names) + str(i).encode()
    p, k = os.path.join(root, rel), rnd.random()
    if k < 0.15:
        os.makedirs(p)
        dirs.append(rel)
    elif k < 0.2:
        os.symlink(b'../elsewhere', p)
    else:
        with open(p, 'wb') as f:
            f.write(rnd.randbytes(rnd.choice([0, 10, 3000, 40000])))
        os.chmod(p, rnd.choice([0o644, 0o755, 0o600]))
PY
}

same_trees() {
	tree_sig "$P" >"$TRASH/sig.local" && tree_sig "$R" >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote"
}

stat_of() { sed -n "s/^$1: \([0-9]*\) bytes.*/\1/p" "$TRASH/out"; }

# change_mib FILE OFFSET_MIB: overwrite 1 MiB of FILE at OFFSET_MIB.
change_mib() {
	python3 -c 'import os,sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])<<20); f.write(os.urandom(1<<20))' "$1" "$2"
}

test_expect_success 'setup: sshd, the proxy in front of it, a project' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy wan "$SSHD_PORT_gpuhost" &&
	ssh_host_via viaproxy gpuhost "$PROXY_PORT_wan" &&
	gen_tree "$P" 7 250 && mkdir -p "$P/empty" && write_ini "$P" viaproxy libssh2 proj
'

test_expect_success 'first sync over ssh: the trees are equal' '
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "^synced" "$TRASH/err" &&
	same_trees
'

# The agent leaves zero blocks as holes and sets the size only when the
# file ends in one (an ftruncate per file cost a journal transaction).
test_expect_success 'files that end in zeros, or are only zeros, keep their size' '
	mkdir -p "$P/zeros" &&
	head -c 8000 /dev/urandom >"$P/zeros/tail" && head -c 70000 /dev/zero >>"$P/zeros/tail" &&
	head -c 70000 /dev/zero >"$P/zeros/all" &&
	head -c 4096 /dev/zero >"$P/zeros/one-block" &&
	head -c 70000 /dev/zero >"$P/zeros/head" && head -c 10 /dev/urandom >>"$P/zeros/head" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") && test_grep "^synced" "$TRASH/err" &&
	for f in tail all one-block head; do
		cmp "$P/zeros/$f" "$R/zeros/$f" || return 1
	done &&
	same_trees
'

test_expect_success 'no-op sync: at most 2 KB on the wire beyond the connection' '
	b0=$(proxy_bytes wan) && (cd "$P" && "$GPURUN" exec true) && b1=$(proxy_bytes wan) &&
	(cd "$P" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") && b2=$(proxy_bytes wan) &&
	test_grep "up to date" "$TRASH/err" &&
	(cd "$P" && GPURUN_TRACE=1 "$GPURUN" sync 2>"$TRASH/trace") &&
	test_grep "requests in the command" "$TRASH/trace" &&
	conn=$((b1 - b0)) noop=$((b2 - b1)) &&
	say "bare connection + exec: $conn bytes; no-op sync: $noop bytes" &&
	test $((noop - conn)) -le 2048 && test "$(stat_of wire)" -le 2048
'

test_expect_success 'a 20 MB file with 1 MiB changed goes as a small delta' '
	head -c 20000000 /dev/urandom >"$P/data.bin" && (cd "$P" && "$GPURUN" -q sync) &&
	change_mib "$P/data.bin" 9 && b0=$(proxy_bytes wan) &&
	(cd "$P" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") && b1=$(proxy_bytes wan) &&
	cat "$TRASH/out" && test_grep "1 as deltas" "$TRASH/out" &&
	test_grep "0 signatures asked" "$TRASH/out" &&
	say "delta sync moved $((b1 - b0)) bytes through the proxy" &&
	test $((b1 - b0)) -lt 1500000 && test "$(stat_of wire)" -lt 1200000 &&
	same_trees
'

test_expect_success 'without a cached signature the host sends one; still small' '
	rm -rf "$P/.gpurun/sigs" && change_mib "$P/data.bin" 3 && b0=$(proxy_bytes wan) &&
	(cd "$P" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") && b1=$(proxy_bytes wan) &&
	test_grep "1 signatures asked" "$TRASH/out" && test_grep "1 as deltas" "$TRASH/out" &&
	say "delta with a signature from the host: $((b1 - b0)) bytes" &&
	test $((b1 - b0)) -lt 1700000 && same_trees &&
	ls "$P/.gpurun/sigs" >"$TRASH/sigs" && test "$(wc -l <"$TRASH/sigs")" = 1
'

test_expect_success 'a large file changed on the host: noticed, its signature asked, fixed' '
	change_mib "$R/data.bin" 15 &&
	(cd "$P" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	test_grep "data.bin changed on the host since the last sync; overwriting" "$TRASH/err" &&
	test_grep "1 signatures asked" "$TRASH/out" && same_trees
'

test_expect_success 'a rewritten large file goes whole, not as a delta' '
	head -c 3000000 /dev/urandom >"$P/data.bin" &&
	(cd "$P" && "$GPURUN" sync --stats >"$TRASH/out" 2>"$TRASH/err") &&
	test_grep "1 whole" "$TRASH/out" && same_trees
'

# The tar's zstd level follows the link (sync_xfer_tar.c): it starts at 1,
# which keeps up with loopback, and goes up when the sender waits for the
# link. 24 MB of text through a 4 MB/s proxy: it waits, the level rises,
# and the stream, cut into frames of different levels mid-file, arrives
# whole.
gen_text() {
	python3 - "$1" <<'PY'
import os, random, sys
root, rnd = sys.argv[1], random.Random(5)
words = ['loss', 'grad', 'batch', 'layer', 'tensor', 'optim', 'epoch', 'lr', 'weight']
os.makedirs(root, exist_ok=True)
for i in range(48):
    with open(os.path.join(root, 'log%02d.txt' % i), 'w') as f:
        while f.tell() < 500000:
            f.write(' '.join(rnd.choice(words) + str(rnd.randint(0, 9999)) for _ in range(8)) + '\n')
PY
}

test_expect_success 'over a slow link the tar is compressed harder, and arrives whole' '
	start_proxy slow "$SSHD_PORT_gpuhost" 1 4000000 &&
	ssh_host_via viaslow gpuhost "$PROXY_PORT_slow" &&
	T=$TRASH/text && gen_text "$T" && write_ini "$T" viaslow libssh2 text &&
	(cd "$T" && GPURUN_TRACE=1 "$GPURUN" -q sync --yes 2>"$TRASH/err") &&
	test_grep "sync: tar level 2 (waited for the link" "$TRASH/err" &&
	tree_sig "$T" gpurun.ini >"$TRASH/sig.local" &&
	tree_sig "$TRASH/gpuhost-home/text" gpurun.ini >"$TRASH/sig.remote" &&
	test_cmp "$TRASH/sig.local" "$TRASH/sig.remote"
'

# A first sync sends from its spool (sync_first.h); a file replaced after
# the walk saw it is not sent (the host gets nothing there), and what the
# host then holds is what the sync expects: it succeeds, says so, and the
# next sync sends the file. (Over the slow link above: the 8 MB before it
# take 2 s, and the file is replaced once the transfer starts.)
test_expect_success 'a first sync: a file replaced after the walk is left out, and sent next time' '
	F=$TRASH/first && mkdir -p "$F" && head -c 8000000 /dev/urandom >"$F/a.bin" &&
	echo old >"$F/late.txt" && write_ini "$F" viaslow libssh2 first &&
	rm -f "$TRASH/rc" && { (cd "$F" && GPURUN_TRACE=1 "$GPURUN" sync --yes >"$TRASH/out" 2>&1;
				echo $? >"$TRASH/rc") & } &&
	for i in $(seq 1000); do grep -q "transfer starts" "$TRASH/out" && break; sleep 0.01; done &&
	test_grep "the host holds nothing: all of it from the spool" "$TRASH/out" &&
	mv "$F/late.txt" "$F/late.old" && echo new >"$F/late.txt" && rm "$F/late.old" &&
	for i in $(seq 600); do test -s "$TRASH/rc" && break; sleep 0.1; done &&
	test "$(cat "$TRASH/rc")" = 0 && test_grep "^synced 3 files" "$TRASH/out" &&
	test_grep "not sent (the next sync sends what is there then)" "$TRASH/out" &&
	test_cmp "$F/a.bin" "$TRASH/gpuhost-home/first/a.bin" &&
	! test -e "$TRASH/gpuhost-home/first/late.txt" &&
	(cd "$F" && GPURUN_TRACE=1 "$GPURUN" sync --yes >"$TRASH/out" 2>&1) &&
	test_grep "walked against the state: 3 entries, 1 differ" "$TRASH/out" &&
	test_grep -x new "$TRASH/gpuhost-home/first/late.txt"
'

test_done
