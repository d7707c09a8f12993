#!/bin/bash
# How a sync's COMMIT makes its files durable before it renames them. On
# ext4 and XFS: each temp file's own data is waited for (sync_file_range
# with WAIT_AFTER), then one new unnamed file is fsynced (a journal commit
# takes every earlier change with it). No syncfs there, which waits for
# every other writer's dirty data on the file system, such as a running
# job's checkpoints (issue 13), unless more than 4,096 small files wait:
# then syncfs, whose write-back merges them. Elsewhere (here: a tmpfs),
# syncfs. The agent runs under strace, which lists the calls it made.
. "$(dirname "$0")/../lib.sh"

RH=$TRASH/gpuhost-home
P=$TRASH/proj

if ! command -v strace >/dev/null; then
	test_skip 'sync durability calls' 'needs strace (scripts/install-deps.sh installs it)'
	test_done
fi

# The agent under strace: the calls that make data durable, every thread.
wrap_agent() {
	agent_wrap "$RH" strace -f -qq -e trace=syncfs,fsync,fdatasync,sync,sync_file_range,openat,rename,renameat,renameat2 \
		-o "$TRASH/strace.log"
}

make_files() { # make_files DIR: three small files and one of 3 MiB
	mkdir -p "$1/src" &&
	for f in a b c; do echo "print('$f')" >"$1/src/$f.py" || return 1; done &&
	head -c 3145728 /dev/urandom >"$1/weights.bin"
}

waits() { grep -c 'sync_file_range(.*SYNC_FILE_RANGE_WAIT_BEFORE|SYNC_FILE_RANGE_WRITE|SYNC_FILE_RANGE_WAIT_AFTER' "$TRASH/strace.log"; }

test_expect_success 'setup: sshd, the agent under strace' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	make_files "$P" && write_ini "$P" gpuhost libssh2 dst && mkdir -p "$RH/dst" &&
	"$GPURUN" -C "$P" exec true && wrap_agent &&
	: >"$TRASH/strace.log" && "$GPURUN" -C "$P" exec true &&
	grep -q . "$TRASH/strace.log" ||
	{ say "strace cannot trace the agent here"; cat "$TRASH/strace.log" >&2; false; }
'

fs=$(stat -f -c %T "$RH/dst" 2>/dev/null)
[ "$fs" != ext2/ext3 ] || fs=ext4 # stat names ext4 by the magic ext2 and ext3 share
case $fs in
ext4 | xfs)
	test_expect_success "on $fs: each file's own data, one journal commit, no syncfs" '
		: >"$TRASH/strace.log" &&
		"$GPURUN" -C "$P" -q sync --yes &&
		cmp "$P/weights.bin" "$RH/dst/weights.bin" && cmp "$P/src/b.py" "$RH/dst/src/b.py" &&
		! grep -E "syncfs\(|[^_]sync\(\)" "$TRASH/strace.log" &&
		n=$(waits) && [ "$n" -ge 4 ] &&
		grep -q "O_TMPFILE" "$TRASH/strace.log" &&
		tmpfd=$(sed -n "s/.*O_TMPFILE.*= \([0-9][0-9]*\)$/\1/p" "$TRASH/strace.log" | tail -1) &&
		grep -q "fsync($tmpfd)" "$TRASH/strace.log"
	'
	test_expect_success "on $fs: an edit waits for the changed file only" '
		echo "print(2)" >>"$P/src/a.py" && : >"$TRASH/strace.log" &&
		"$GPURUN" -C "$P" -q sync --yes && cmp "$P/src/a.py" "$RH/dst/src/a.py" &&
		! grep -q "syncfs(" "$TRASH/strace.log" && [ "$(waits)" = 1 ]
	'
	test_expect_success "on $fs: 4,097 new small files: syncfs, no wait for each" '
		mkdir -p "$P/many" &&
		(cd "$P/many" && for i in $(seq 4097); do echo "$i" >"f$i.txt"; done) &&
		: >"$TRASH/strace.log" &&
		"$GPURUN" -C "$P" -q sync --yes && cmp "$P/many/f4097.txt" "$RH/dst/many/f4097.txt" &&
		grep -q "syncfs(" "$TRASH/strace.log" && [ "$(waits)" = 0 ] && rm -rf "$P/many"
	'
	;;
*)
	test_skip 'each file'"'"'s own data, one journal commit' "the host folder is on $fs, not ext4 or XFS"
	test_skip 'an edit waits for the changed file only' "the host folder is on $fs, not ext4 or XFS"
	test_skip '4,097 new small files: syncfs' "the host folder is on $fs, not ext4 or XFS"
	;;
esac

# A first sync into a new folder stages its folders (sync_agent.h): one
# rename for src/ and its 300 files, one for each top-level file, one for
# the manifest; not one for each file (~35 us of journaling each).
test_expect_success 'a first sync into a new folder: one rename per new top folder, not per file' '
	P2=$TRASH/proj2 && mkdir -p "$P2/src/a" "$P2/src/b" "$P2/src/c" &&
	for d in a b c; do
		for i in $(seq 100); do echo "$d $i" >"$P2/src/$d/m$i.py" || return 1; done
	done &&
	echo top >"$P2/top.txt" && write_ini "$P2" gpuhost libssh2 dst2 && : >"$TRASH/strace.log" &&
	"$GPURUN" -C "$P2" -q sync --yes && diff -r "$P2/src" "$RH/dst2/src" &&
	cmp "$P2/top.txt" "$RH/dst2/top.txt" && ! find "$RH/dst2" -name ".gpurun-tmp-*" | grep -q . &&
	n=$(grep -c "rename" "$TRASH/strace.log") && say "$n renames for 302 files" &&
	[ "$n" -ge 2 ] && [ "$n" -le 8 ]
'

if [ "$(id -u)" = 0 ]; then
	test_expect_success 'on a tmpfs: syncfs, as before' '
		mkdir -p "$RH/ram" && mount -t tmpfs -o size=64m,mode=755 gpurun-t0319 "$RH/ram" &&
		test_atexit "umount \"$RH/ram\" 2>/dev/null" &&
		write_ini "$P" gpuhost libssh2 ram && : >"$TRASH/strace.log" &&
		"$GPURUN" -C "$P" -q sync --yes && cmp "$P/weights.bin" "$RH/ram/weights.bin" &&
		grep -q "syncfs(" "$TRASH/strace.log" && [ "$(waits)" = 0 ]
	'
else
	test_skip 'on a tmpfs: syncfs, as before' 'mounting a tmpfs needs root'
fi

test_done
