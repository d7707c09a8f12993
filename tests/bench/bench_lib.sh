# Shared by the benchmarks (sourced after tests/lib.sh): medians and ratios
# that say "failed" when a run failed or a cell has no number, never
# "nan", an empty cell or an awk division by zero.

# median: the median of the numbers on stdin; "failed" if any line is
# not a number (a failed run records "failed") or there are none; "-"
# if every line is "-" (nothing to measure).
median() {
	awk '$1 == "-" { dash++ } $1 !~ /^-?[0-9]+(\.[0-9]+)?$/ || $1 < 0 { bad = 1 } { v[NR] = $1 }
	END {
		if (NR && dash == NR) { print "-"; exit }
		if (bad || NR == 0) { print "failed"; exit }
		n = asort(v)
		if (n % 2) print v[(n + 1) / 2]; else print int((v[n / 2] + v[n / 2 + 1]) / 2)
	}'
}

# ratio A B [FORMAT]: A/B, or "failed" when either is not a number or B
# is zero.
ratio() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN {
		if (a !~ /^[0-9]+(\.[0-9]+)?$/ || b !~ /^[0-9]+(\.[0-9]+)?$/ || b + 0 == 0) print "failed"
		else printf f "\n", a / b }'
}

# many_files DIR N [empty]: N small files, 1000 a folder: DIR/dK/fJ.txt
# for file number K*1000+J, each holding its number (empty: nothing),
# so a tree of any size is made in seconds and a path names its file.
many_files() {
	python3 - "$1" "$2" "${3:-}" <<'PY'
import os, sys
root, n, empty = sys.argv[1], int(sys.argv[2]), sys.argv[3] == 'empty'
for i in range(n):
    d = os.path.join(root, 'd%d' % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'f%d.txt' % (i % 1000)), 'w') as f:
        if not empty:
            f.write('%d\n' % i)
PY
}

# Copies on a new file system each run: a loop-mounted ext4 image with
# direct I/O, so a flush reaches the disk. The host's disk then holds no
# inodes freed by earlier runs or by other work on the machine (ext4's
# allocator steps over recently freed ones: recently_deleted() in a
# profile), which made back-to-back runs here differ 2-7x (issue 13).
# BENCH_FS=plain: the home folder's own file system; also what happens
# without root or loop devices. Call fs_setup BASE once, fresh_fs BASE
# DST... before each run, unmount_all BASE before test_done (and at exit).
fs_setup() {
	test_atexit "unmount_all '$1'"
	BENCH_FS=${BENCH_FS:-loop}
	FS_MB=${FS_MB:-1536}
	if [ "$BENCH_FS" = loop ] && { [ "$(id -u)" != 0 ] || ! command -v losetup >/dev/null ||
		! command -v mkfs.ext4 >/dev/null; }; then
		say "no loop devices here (needs root, losetup, mkfs.ext4): BENCH_FS=plain"
		BENCH_FS=plain
	fi
}
fs_said() {
	if [ "$BENCH_FS" = loop ]; then
		echo "a new ext4 each run (loop device, direct I/O, $FS_MB MiB)"
	else
		echo "the home folder's file system"
	fi
}
unmount_fs() { # unmount_fs DIR: its loop mount, if it is one, and the image
	local dev
	mountpoint -q "$1" 2>/dev/null || return 0
	dev=$(findmnt -n -o SOURCE --target "$1")
	umount "$1" && losetup -d "$dev" 2>/dev/null
	rm -f "$TRASH/fs/$(basename "$1").img"
}
fresh_fs() { # fresh_fs BASE DST...: each BASE/DST a new, empty ext4
	local base=$1 d dev
	shift
	[ "$BENCH_FS" = loop ] || return 0
	mkdir -p "$TRASH/fs" "$TRASH/old"
	for d in "$@"; do
		unmount_fs "$base/$d"
		[ ! -e "$base/$d" ] || mv "$base/$d" "$TRASH/old/$d.$(date +%s%N)"
		mkdir -p "$base/$d"
		truncate -s "${FS_MB}M" "$TRASH/fs/$d.img" &&
			mkfs.ext4 -q -F -N 200000 -E lazy_itable_init=0,lazy_journal_init=0 \
				"$TRASH/fs/$d.img" &&
			dev=$(losetup --find --show --direct-io=on "$TRASH/fs/$d.img") &&
			mount "$dev" "$base/$d" && rmdir "$base/$d/lost+found" ||
			{ say "cannot make a file system for $d"; return 1; }
	done
}
unmount_all() { # unmount_all BASE: every loop mount in it
	local m
	for m in "$1"/*; do unmount_fs "$m"; done
}

# in_turn ROUND CMD...: the commands in turn, the list rotated by one each
# round (two: A B in odd rounds, B A in even ones). What ran just before
# moves a tool's time by several percent here (page cache the VM's host
# took back, write-back of the other's copy), so a fixed order gives that
# to the same tool each time.
in_turn() {
	local r=$1 n i
	shift
	n=$#
	for i in $(seq 0 $((n - 1))); do
		eval "\"\${$(( (i + r - 1) % n + 1 ))}\""
	done
}
