#!/bin/bash
# The six ways sync got stuck, hung or leaked (issue 10), each as it was
# reproduced: (1) a large file rewritten with compressible content, (2) the
# host refusing files while they are sent (disk full, a read-only folder)
# and an agent that stops answering, (3) a synced folder replaced by a
# symlink on the host, (4) a folder swapped for a symlink here while a sync
# runs, (5) a fresh clone syncing to a host folder of 100,000 files, (6) a
# job's hard link reported as a change on the host.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/remote

same_trees() {
	tree_sig "$1" >"$TRASH/sig.a" && tree_sig "$2" >"$TRASH/sig.b" &&
	test_cmp "$TRASH/sig.a" "$TRASH/sig.b"
}

# sync_bounded DIR [ARGS...]: gpurun sync in DIR, failing the case (rather
# than hanging the run) if it does not end within 300 s; its stderr in
# $TRASH/err, its exit code in $rc.
sync_bounded() {
	_d=$1
	shift
	(cd "$_d" && timeout -k 5 300 "$GPURUN" sync "$@" 2>"$TRASH/err")
	rc=$?
	cat "$TRASH/err" >&2
	if [ $rc = 124 ] || [ $rc = 137 ]; then say "gpurun sync hung"; return 1; fi
	return 0
}

# progress_ok DIR: gpurun sync in DIR, and the progress it counted (the bar
# shows it on a terminal) came out at the total, not past it.
progress_ok() {
	(cd "$1" && GPURUN_TRACE=1 "$GPURUN" sync --yes 2>"$TRASH/err") || { cat "$TRASH/err" >&2; return 1; }
	grep "transfer done" "$TRASH/err" >&2
	sed -n "s/.*transfer done (progress \([0-9]*\) of \([0-9]*\) bytes).*/\1 \2/p" "$TRASH/err" |
		awk "NF == 2 && \$1 == \$2 { ok = 1 } END { exit !ok }"
}

test_expect_success '(1) a large file rewritten with compressible content syncs (3 MiB zeros, then ones)' '
	mkdir -p "$P/data" && write_ini "$P" local local "$R" &&
	head -c 3145728 /dev/zero >"$P/data/d.bin" && sync_bounded "$P" && test $rc = 0 &&
	head -c 3145728 /dev/zero | tr "\0" "\1" >"$P/data/d.bin" &&
	sync_bounded "$P" && test $rc = 0 && same_trees "$P" "$R" &&
	sync_bounded "$P" && test $rc = 0 && test_grep "up to date" "$TRASH/err"
'

test_expect_success '(1) a regenerated 50 MB float32 dataset syncs; the progress bar never passes its total' '
	gen_f32() { # 12.5M float32 values in [1, 4): random mantissas, a few exponents
		python3 -c "import random,sys; r=random.Random(int(sys.argv[2])); b=bytearray(r.randbytes(50000000)); b[3::4]=bytes([0x3f,0x40]*6250000); open(sys.argv[1],\"wb\").write(b)" "$@"
	} &&
	gen_f32 "$P/data/train.bin" 1 && sync_bounded "$P" --yes && test $rc = 0 &&
	gen_f32 "$P/data/train.bin" 2 && progress_ok "$P" && same_trees "$P" "$R"
'

# The agent alone, with hand-made frames: a whole file whose zstd frame
# ends in one DATA frame and an empty DATA frame carrying END.
test_expect_success '(1) the agent takes a FILE stream whose last DATA frame is empty' '
	mkdir -p "$TRASH/ar" && python3 - "$BUILD/gpurun-agent" "$TRASH/ar" <<-\PY
	import hashlib, os, struct, subprocess, sys
	agent, root = sys.argv[1], sys.argv[2]
	def s(b): b = b if isinstance(b, bytes) else b.encode(); return struct.pack(">I", len(b)) + b
	def frame(t, i, p=b"", flags=0): return struct.pack(">IHHI", len(p), t, flags, i) + p
	data = bytes([1]) * (3 << 20)
	# the content hash, as sync_manifest.c defines it: 2 KiB blocks
	leaves = b"".join(hashlib.blake2b(data[o:o + 2048], digest_size=32).digest()
	                  for o in range(0, len(data), 2048))
	h = hashlib.blake2b(leaves + struct.pack("<Q", len(data)), digest_size=32).digest()
	z = subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True).stdout
	out = frame(0x20, 2, s(root) + struct.pack(">I", 0) + s(b"") + s(b"\0" * 32))
	out += frame(0x24, 3, struct.pack(">I", 2) + b"\x01" + s("d.bin") + s(b"\0" * 32) + s(h) +
	             struct.pack(">QIQ", len(data), 0o644, 0))
	out += frame(4, 3, z) + frame(4, 3, b"", flags=1)
	p = subprocess.run([agent, "serve"], input=out, capture_output=True)
	d = p.stdout[p.stdout.index(b"\n") + 1:]
	while len(d) >= 12:
	    n, t, fl, i = struct.unpack(">IHHI", d[:12]); pl = d[12:12 + n]; d = d[12 + n:]
	    if i == 3:
	        print(hex(t), pl[8:].decode(errors="replace"))
	        sys.exit(0 if t == 2 else 1)
	sys.exit(1)
	PY
'

# New folders sent out of order (gpurun's client sends them sorted, another
# client need not): a symlink in the last one must find it, staged.
test_expect_success '(7) OPS: new folders out of order, a symlink in one of them' '
	mkdir -p "$TRASH/ao" && python3 - "$BUILD/gpurun-agent" "$TRASH/ao" <<-\PY
	import struct, subprocess, sys
	agent, root = sys.argv[1], sys.argv[2]
	def s(b): b = b if isinstance(b, bytes) else b.encode(); return struct.pack(">I", len(b)) + b
	def frame(t, i, p=b"", flags=0): return struct.pack(">IHHI", len(p), t, flags, i) + p
	ops = struct.pack(">I", 4) + b"\x02" + s("c") + b"\x02" + s("b") + b"\x02" + s("a") + \
	      b"\x03" + s("a/l") + s("target")
	out = frame(0x20, 2, s(root) + struct.pack(">I", 0) + s(b"") + s(b"\0" * 32))
	out += frame(0x22, 2, ops) + frame(0x26, 2, s(b"\0" * 32))
	p = subprocess.run([agent, "serve"], input=out, capture_output=True)
	print(p.stdout[p.stdout.index(b"\n") + 1:].decode(errors="replace"))
	PY
	test "$(readlink "$TRASH/ao/a/l")" = target && test -d "$TRASH/ao/b" && test -d "$TRASH/ao/c" &&
	! ls -a "$TRASH/ao" | grep -q gpurun-tmp
'

test_expect_success 'setup: a 24 MiB tmpfs as the remote folder' '
	mkdir -p "$TRASH/small" && mount -t tmpfs -o size=24m,mode=755 gpurun-test "$TRASH/small" &&
	test_atexit "umount -l \"$TRASH/small\" 2>/dev/null" &&
	S=$TRASH/small/proj && PS=$TRASH/projs && mkdir -p "$PS/data" &&
	write_ini "$PS" local local "$S" &&
	for i in 1 2 3 4 5; do echo "small $i" >"$PS/f$i.txt"; done &&
	head -c 3000000 /dev/urandom >"$PS/data/big.bin" &&
	sync_bounded "$PS" && test $rc = 0 && same_trees "$PS" "$S"
'

# no_space_case: the sync fails in bounded time naming the cause and how
# much is missing, leaves no temp file, and the next sync after the host
# has room converges.
no_space_case() {
	sync_bounded "$PS" && test $rc = 250 &&
	test_grep "no space left on the host (needs [0-9]* MiB more)" "$TRASH/err" &&
	! grep -q "run .gpurun sync. again" "$TRASH/err" &&
	test_grep "^hint: make room in" "$TRASH/err" &&
	! find "$S" -name ".gpurun-tmp-*" | grep -q . &&
	mount -o remount,size=96m "$TRASH/small" &&
	sync_bounded "$PS" && test $rc = 0 && same_trees "$PS" "$S"
}

test_expect_success '(2) disk full on the host, a large changed file (its own stream): an error, then it converges' '
	head -c 40000000 /dev/urandom >"$PS/data/big.bin" && echo more >>"$PS/f1.txt" &&
	no_space_case
'

test_expect_success '(2) disk full on the host, new files (the tar stream): an error, then it converges' '
	rm -f "$PS/data/big.bin" && sync_bounded "$PS" && test $rc = 0 &&
	mount -o remount,size=24m "$TRASH/small" &&
	head -c 30000000 /dev/urandom >"$PS/data/new1.bin" && echo x >"$PS/data/new2.txt" &&
	no_space_case
'

test_expect_success '(2) a read-only remote folder for a user who is not root: permission denied, then it converges' '
	if [ "$(id -u)" = 0 ]; then
		run=(setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$TRASH/nb-home")
	else
		run=(env)
	fi &&
	chmod 755 "$TRASH" && NB=$TRASH/nb && mkdir -p "$NB/p/data" "$NB/r" "$TRASH/nb-home" &&
	write_ini "$NB/p" local local "$NB/r" &&
	head -c 3000000 /dev/urandom >"$NB/p/data/big.bin" && echo a >"$NB/p/a.txt" &&
	chown -R nobody:nogroup "$NB" "$TRASH/nb-home" &&
	(cd "$NB/p" && "${run[@]}" "$GPURUN" -q sync) &&
	chmod a-w "$NB/r" "$NB/r/data" &&
	"${run[@]}" sh -c "head -c 5000000 /dev/urandom >\"$NB/p/data/big.bin\" && echo new >\"$NB/p/new.txt\"" &&
	(cd "$NB/p" && timeout -k 5 300 "${run[@]}" "$GPURUN" sync 2>"$TRASH/err"; echo $? >"$TRASH/rc") &&
	cat "$TRASH/err" && test "$(cat "$TRASH/rc")" = 250 &&
	test_grep "data/big.bin" "$TRASH/err" && test_grep "permission denied on the host" "$TRASH/err" &&
	! grep -q "run .gpurun sync. again" "$TRASH/err" &&
	chmod u+w "$NB/r" "$NB/r/data" &&
	(cd "$NB/p" && "${run[@]}" "$GPURUN" -q sync) && same_trees "$NB/p" "$NB/r"
'

test_expect_success '(3) a synced folder of 300 files replaced by a symlink on the host: replaced once, converges' '
	mkdir -p "$P/d/sub" "$TRASH/elsewhere" &&
	for i in $(seq 1 300); do echo "$i" >"$P/d/sub/f$i"; done &&
	echo keep >"$TRASH/elsewhere/f1" &&
	sync_bounded "$P" --yes && test $rc = 0 &&
	rm -rf "$R/d" && ln -s "$TRASH/elsewhere" "$R/d" &&
	sync_bounded "$P" && test $rc = 0 &&
	test "$(grep -c "^gpurun: " "$TRASH/err")" = 1 && test_grep "^gpurun: d .*symlink" "$TRASH/err" &&
	! grep -q "Not a directory" "$TRASH/err" &&
	test "$(cat "$TRASH/elsewhere/f1")" = keep && test "$(ls "$TRASH/elsewhere")" = f1 &&
	same_trees "$P" "$R" &&
	sync_bounded "$P" && test_grep "up to date" "$TRASH/err"
'

test_expect_success '(3) a symlink replaced by a folder on the host: an empty one is replaced, a full one reported' '
	ln -s target "$P/lnk" && ln -s target2 "$P/lnk2" && sync_bounded "$P" && test $rc = 0 &&
	rm "$R/lnk" && mkdir "$R/lnk" && rm "$R/lnk2" && mkdir "$R/lnk2" && echo theirs >"$R/lnk2/result" &&
	sync_bounded "$P" && test $rc = 250 &&
	test_grep "lnk2.*in the way" "$TRASH/err" && test_grep "hold files gpurun did not send" "$TRASH/err" &&
	test -L "$R/lnk" && test "$(cat "$R/lnk2/result")" = theirs &&
	rm -r "$R/lnk2" && sync_bounded "$P" && test $rc = 0 && same_trees "$P" "$R"
'

# (4) needs a transfer slow enough to swap a folder while it runs: ssh
# through the delay proxy at 4 MB/s, a 12 MB file sent first (new files
# go in the tar stream in path order). Background jobs read better as
# statements than in one && chain: each case is a function.
L=$TRASH/lproj
RL=$TRASH/gpuhost-home/lproj

# sync_in_background: gpurun sync in $L, its pid in $bg, its stderr in
# $TRASH/err and its exit code in $TRASH/rc when it ends.
sync_in_background() {
	(cd "$L" && timeout -k 5 300 "$GPURUN" sync --yes 2>"$TRASH/err"; echo $? >"$TRASH/rc") &
	bg=$!
}

# wait_for_temp: until a temp file on the host shows the transfer is under way.
wait_for_temp() {
	for _i in $(seq 1 3000); do
		find "$RL" -name ".gpurun-tmp-*" 2>/dev/null | grep -q . && return 0
		sleep 0.01
	done
	say "no temp file appeared under $RL"
	return 1
}

swap_folder() {
	mkdir -p "$L/sub" "$TRASH/secret" && write_ini "$L" viaslow libssh2 lproj &&
	echo mine >"$L/sub/x" && echo mine >"$L/sub/y" && (cd "$L" && "$GPURUN" -q sync) || return 1
	echo TOP-SECRET >"$TRASH/secret/x" && echo TOP-SECRET >"$TRASH/secret/y" &&
	echo changed >"$L/sub/x" && echo changed >"$L/sub/y" &&
	head -c 12000000 /dev/urandom >"$L/a.bin" || return 1
	sync_in_background
	wait_for_temp || return 1
	mv "$L/sub" "$TRASH/sub-moved" && ln -s "$TRASH/secret" "$L/sub"
	wait $bg
	cat "$TRASH/err" >&2
	test "$(cat "$TRASH/rc")" = 0 && ! grep -rq TOP-SECRET "$RL" &&
	test_grep "above .sub/x. was replaced" "$TRASH/err" || return 1
	rm "$L/sub" && mv "$TRASH/sub-moved" "$L/sub" &&
	(cd "$L" && "$GPURUN" -q sync) && same_trees "$L" "$RL"
}

swap_file() {
	echo outside >"$TRASH/other-file" && echo again >"$L/sub/y" &&
	head -c 12000000 /dev/urandom >"$L/a2.bin" || return 1
	sync_in_background
	wait_for_temp || return 1
	ln -f "$TRASH/other-file" "$L/sub/y"
	wait $bg
	cat "$TRASH/err" >&2
	test "$(cat "$TRASH/rc")" = 0 && ! grep -q outside "$RL/sub/y" &&
	test_grep "sub/y. was replaced by another file" "$TRASH/err" || return 1
	(cd "$L" && "$GPURUN" -q sync) && same_trees "$L" "$RL"
}

stop_agent() {
	head -c 30000000 /dev/urandom >"$L/stall.bin" || return 1
	(cd "$L" && GPURUN_IO_TIMEOUT=3 timeout -k 5 120 "$GPURUN" sync --yes 2>"$TRASH/err"
	 echo $? >"$TRASH/rc") &
	bg=$!
	wait_for_temp || return 1
	agent=$(pgrep -f "$TRASH/gpuhost-home/.cache/gpurun/agent-.* serve" | head -1)
	test -n "$agent" && kill -STOP "$agent" || return 1
	wait $bg
	kill -CONT "$agent"
	kill "$agent"
	cat "$TRASH/err" >&2
	test "$(cat "$TRASH/rc")" = 255 && test_grep "nothing for 3 s" "$TRASH/err" &&
	(cd "$L" && "$GPURUN" -q sync --yes) && same_trees "$L" "$RL"
}

test_expect_success 'setup: sshd behind a 4 MB/s proxy' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy slow "$SSHD_PORT_gpuhost" 1 4000000 &&
	ssh_host_via viaslow gpuhost "$PROXY_PORT_slow"
'

test_expect_success '(4) a folder swapped for a symlink here during a sync: nothing from outside is sent' '
	swap_folder
'

test_expect_success '(4) a file replaced by a hard link to another file during a sync is not sent' '
	swap_file
'

test_expect_success '(2) an agent that stops answering: gpurun gives up after GPURUN_IO_TIMEOUT' '
	stop_agent
'

# (5) as it was found: 100,000 files on the host and a clone without
# local state, its manifest past the 4 MiB frame limit. Here 30,000 files
# with long names and distinct content (so the manifest does not
# compress) make a state of more than 4 MiB at less cost; then every
# message that grows with the tree: 30,000 changes found on the host,
# 30,000 mode changes (OPS), deletions.
test_expect_success '(5) a fresh clone syncs to a host folder whose manifest is past the frame limit' '
	B=$TRASH/bigproj && RB=$TRASH/bigremote && mkdir -p "$B" && write_ini "$B" local local "$RB" &&
	python3 -c "
import os, random, string, sys
root, r = sys.argv[1], random.Random(5)
name = lambda n: \"\".join(r.choice(string.ascii_letters + string.digits) for _ in range(n))
for d in range(30):
    p = os.path.join(root, \"%02d-%s\" % (d, name(40)))
    os.makedirs(p)
    for f in range(1000):
        with open(os.path.join(p, name(160)), \"w\") as fh:
            fh.write(\"%d/%d\\n\" % (d, f))
" "$B" &&
	sync_bounded "$B" --yes && test $rc = 0 &&
	rm -rf "$B/.gpurun" && (cd "$B" && "$GPURUN" sync --dry-run --stats >"$TRASH/out" 2>"$TRASH/err") &&
	in=$(sed -n "s/^wire: .* sent, \([0-9]*\) received.*/\1/p" "$TRASH/out") &&
	say "the host state a clone gets: $in bytes" && test "$in" -gt 4194304 &&
	sync_bounded "$B" && test $rc = 0 && sync_bounded "$B" && test_grep "up to date" "$TRASH/err" &&
	rm -rf "$B/.gpurun" && echo new >"$B/one-more" && sync_bounded "$B" && test $rc = 0 &&
	same_trees "$B" "$RB"
'

test_expect_success '(5) 30,000 changes on the host, then 30,000 mode changes and deletions here' '
	find "$RB" -type f ! -path "*/.gpurun/*" -exec touch -d "2001-01-01" {} + &&
	sync_bounded "$B" && test $rc = 0 && same_trees "$B" "$RB" &&
	test "$(grep -c "changed on the host" "$TRASH/err")" -le 21 &&
	test_grep "and [0-9]* more changed on the host" "$TRASH/err" &&
	find "$B" -type f ! -path "*/.gpurun/*" -exec chmod 600 {} + && sync_bounded "$B" && test $rc = 0 &&
	same_trees "$B" "$RB" &&
	rm -rf "$B"/0[0-4]-* && sync_bounded "$B" && test $rc = 0 && same_trees "$B" "$RB"
'

test_expect_success 'setup: a tmpfs with strictatime as the remote folder (reads show)' '
	mkdir -p "$TRASH/atime" && mount -t tmpfs -o size=64m,strictatime gpurun-test-atime "$TRASH/atime" &&
	test_atexit "umount -l \"$TRASH/atime\" 2>/dev/null" &&
	PA=$TRASH/proja && RA=$TRASH/atime/proj && mkdir -p "$PA/data" && write_ini "$PA" local local "$RA" &&
	head -c 5000000 /dev/urandom >"$PA/data/train.bin" && echo code >"$PA/train.py" &&
	sync_bounded "$PA" && test $rc = 0
'

test_expect_success '(6) a hard link made on the host (a job snapshot) is no change: no warning, no re-hash' '
	a0=$(stat -c %X.%x "$RA/data/train.bin") && sleep 0.05 &&
	ln "$RA/data/train.bin" "$TRASH/atime/snapshot-link" &&
	echo edit >>"$PA/train.py" && sync_bounded "$PA" && test $rc = 0 &&
	! grep -q "changed on the host" "$TRASH/err" &&
	test "$(stat -c %X.%x "$RA/data/train.bin")" = "$a0" &&
	rm "$TRASH/atime/snapshot-link" && sync_bounded "$PA" && test $rc = 0 &&
	! grep -q "changed on the host" "$TRASH/err" && test_grep "up to date" "$TRASH/err" &&
	test "$(stat -c %X.%x "$RA/data/train.bin")" = "$a0"
'

test_expect_success '(6) a real change on the host is still noticed (content, mode)' '
	python3 -c "import sys; f=open(sys.argv[1],\"r+b\"); f.seek(100); f.write(b\"X\")" "$RA/data/train.bin" &&
	sync_bounded "$PA" && test $rc = 0 &&
	test_grep "data/train.bin changed on the host since the last sync; overwriting" "$TRASH/err" &&
	same_trees "$PA" "$RA" &&
	chmod 400 "$RA/train.py" && sync_bounded "$PA" && test $rc = 0 &&
	test_grep "train.py changed on the host" "$TRASH/err" && same_trees "$PA" "$RA"
'

test_done
