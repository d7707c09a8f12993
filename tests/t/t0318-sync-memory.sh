#!/bin/bash
# Memory is bounded by design: the peak RSS of gpurun and of gpurun-agent
# (each measured apart: the agent runs under /usr/bin/time behind sshd)
# does not grow with a file's size, and grows with a tree by a bounded
# amount per file. Measured on the release build (ASan's shadow memory and
# quarantine would measure the sanitizer); `make test` builds it first.
# GPURUN_TEST_BIG=1 (CI sets it): a 5 GiB sparse file and a tree of
# 100,000 files; GPURUN_TEST_HUGE=20G: a file of that size.
. "$(dirname "$0")/../lib.sh"

REL=${GPURUN_RELEASE_BUILD:-$TOP/build}
RH=$TRASH/gpuhost-home
LIMIT_KIB=65536   # 64 MiB
# Bytes a file may add to each side's peak (the slope between two trees).
# gpurun's first sync walks into a spool on disk and sends from it a
# window of 4,096 entries at a time (sync_first.h): 11 bytes a file
# measured (2k/50k files), as flat as the no-op. While it held the list
# of the tree: 120-150 (a 96-byte entry, its path in a pool, an 8-byte
# plan item, and where the connection's buffers fall: between 2k and 20k
# files that slope wandered from 124 to 171), bounded at 165; 178-212
# before the scan built the manifest itself and the entries slimmed to
# 96 bytes, 394-740 before the state was streamed, 1,200 before that.
# The agent: 141-202 measured (228-376 before it read its manifest in
# pieces, kept 64 bytes a pending file and merged in place); 163 for a
# first sync since its manifest is written from the pending files
# themselves (221 when each became a manifest entry beside them), 125
# since they go to disk in runs of 8,192 (of empty files, ~10 bytes a
# file are left: bench_memory).
# What grows with these files' content is not the heap: massif's peak of
# live bytes was 5.0 MB at 20,000 files and 6.3 MB at 40,000 (the untar
# queue's chunks, the run buffer, the read buffer), where the peak RSS
# grew by 140 bytes a file; glibc's arenas keep pages the heap let go
# (arena_max=1: 105 a file, mmap_threshold=64k: 92).
GPURUN_PER_FILE_MAX=32
# A walked no-op or edit reads the tree against the index and the last
# committed state in step and keeps only what differs (sync_diff.c): one
# bit a file and no list; an edit plans, commits and writes remote-KEY
# and the index from a merge of the state with what differs. No-op 5
# measured (2k/50k files); 125-150 while it held the list, and the edit
# until it planned on what differs alone. So does a sync that finds the
# host changed since (the paths it changed join what differs:
# sync_diff_changes); ~150 while it made the list for that.
GPURUN_NOOP_PER_FILE_MAX=32
# The sync's own memory, on a connection of its own: through a connection
# holder ([remote] persist) the client carries no SSH session (2.7 MB less
# at 2,000 files, the same peak at 100,000), which would tilt the slope
# (170 measured) without a byte more a file.
export GPURUN_REMOTE_PERSIST=0
AGENT_PER_FILE_MAX=180
# A walked no-op or edit leaves the agent's manifest in its file (read and
# written as a stream, a block of 4,096 entries at a time): its peak does
# not grow with the tree. 16 and 5 bytes a file measured (the block is
# full only in the larger tree); 140-200 while it read the whole list.
AGENT_WALKED_PER_FILE_MAX=32
# A sync that knows no state of its own (remote-KEY lost), or one whose
# state is stale (another clone synced since: here an old remote-KEY put
# back), and finds the host's manifest: the client takes the manifest
# into a file as it arrives, reads its walk (the spool, or the walk read
# against remote-KEY, as a stream) against it and holds what differs
# (sync_host.h); the agent compresses its manifest into a file
# and sends it as the client takes it. What grows between these trees is
# fixed buffers that fill once the answer is a few MiB (the client's
# connection input, 1.6 MiB, and zstd's window; the agent's output queue,
# up to 8 MiB): 55-68 bytes a file measured on the client, 69 on the
# agent, and flat beyond (12.1 MiB at 50,000 and at 200,000 files over
# the local transport; bench_memory: 300,000 and 1,000,000). Holding the
# lists again (the local one and the host's) would be ~250.
STATE_LOST_PER_FILE_MAX=96

if [ ! -x "$REL/gpurun" ] || [ ! -x /usr/bin/time ]; then
	test_skip 'peak memory of sync' "needs the release build ($REL/gpurun: make) and /usr/bin/time"
	test_done
fi
GPURUN=$REL/gpurun

# The agent under /usr/bin/time: each run appends its peak RSS (KiB).
wrap_agent() { agent_wrap "$RH" /usr/bin/time -a -f %M -o "$TRASH/agent.rss"; }

# peak_sync PROJECT: sync it; sets CL and AG (peak RSS in KiB of gpurun
# and of the agent) and says both.
peak_sync() {
	: >"$TRASH/agent.rss"
	/usr/bin/time -f %M -o "$TRASH/client.rss" "$GPURUN" -C "$1" -q sync --yes || return 1
	CL=$(tail -1 "$TRASH/client.rss")
	# The agent may still be exiting (freeing a 100k-file manifest) when
	# gpurun is done: its time writes the line then.
	for _i in $(seq 300); do
		[ -s "$TRASH/agent.rss" ] && break
		sleep 0.1
	done
	AG=$(sort -n "$TRASH/agent.rss" | tail -1)
	echo "$1: peak RSS gpurun $CL KiB, agent ${AG:-?} KiB" | tee -a "$TRASH/memory.txt" >&2
	[ -n "$AG" ]
}

at_most() { # at_most WHAT KIB LIMIT
	[ "$2" -le "$3" ] || { say "$1: peak RSS $2 KiB, over $3 KiB"; return 1; }
}

make_tree() { # make_tree DIR N: N small text files, 4 folders deep
	python3 - "$1" "$2" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(n)
for i in range(n):
    d = os.path.join(root, 'src', 'pkg%03d' % (i % 500), 'mod%d' % (i % 4))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'file_%06d.py' % i), 'w') as f:
        f.write(('x = %d\n' % rnd.randint(0, 1 << 30)) * rnd.randint(5, 100))
PY
}

test_expect_success 'setup: sshd, the agent under /usr/bin/time' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	mkdir -p "$TRASH/boot" && write_ini "$TRASH/boot" gpuhost libssh2 boot &&
	mkdir -p "$RH/boot" && "$GPURUN" -C "$TRASH/boot" exec true && wrap_agent
'

# A file of any size streams through both sides: a sparse one with data
# at both ends and in the middle, sent whole, then as a delta.
HUGE=${GPURUN_TEST_BIG:+5G}
HUGE=${GPURUN_TEST_HUGE:-${HUGE:-1G}}
poke() { # poke FILE OFFSET_MIB MIB: random bytes there
	python3 -c 'import os,sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])<<20); f.write(os.urandom(int(sys.argv[3])<<20))' "$@"
}
test_expect_success "a $HUGE sparse file: peak RSS <= 64 MiB each side, whole and as a delta" '
	P=$TRASH/big && mkdir -p "$P" && write_ini "$P" gpuhost libssh2 big &&
	truncate -s "$HUGE" "$P/model.ckpt" && M=$(($(stat -c %s "$P/model.ckpt") >> 20)) &&
	poke "$P/model.ckpt" 0 1 && poke "$P/model.ckpt" $((M / 2)) 1 && poke "$P/model.ckpt" $((M - 1)) 1 &&
	peak_sync "$P" && at_most gpurun "$CL" $LIMIT_KIB && at_most agent "$AG" $LIMIT_KIB &&
	cmp "$P/model.ckpt" "$RH/big/model.ckpt" &&
	poke "$P/model.ckpt" $((M / 3)) 1 && poke "$P/model.ckpt" "$M" 16 &&
	peak_sync "$P" && at_most gpurun "$CL" $LIMIT_KIB && at_most agent "$AG" $LIMIT_KIB &&
	cmp "$P/model.ckpt" "$RH/big/model.ckpt" && rm -rf "$RH/big" "$P"
'

# Standard input forwarded by exec streams too: gpurun reads no more of
# it than the transport has taken (it read it all as fast as it came:
# 300 MiB of 1 GiB queued with a direct connection, 780 MiB through a
# connection holder, which takes it in 64 KiB pieces). Direct and held.
STDIN_MB=512
test_expect_success "exec with $STDIN_MB MiB on stdin: peak RSS <= 64 MiB, direct and held" '
	P=$TRASH/boot &&
	head -c $((STDIN_MB << 20)) /dev/zero >"$TRASH/stdin.bin" &&
	/usr/bin/time -f %M -o "$TRASH/client.rss" "$GPURUN" -C "$P" exec -- wc -c \
		<"$TRASH/stdin.bin" >"$TRASH/wc.out" &&
	test_grep -x $((STDIN_MB << 20)) "$TRASH/wc.out" &&
	CL=$(tail -1 "$TRASH/client.rss") && echo "exec stdin, direct: peak RSS gpurun $CL KiB" | tee -a "$TRASH/memory.txt" &&
	at_most "gpurun exec" "$CL" $LIMIT_KIB &&
	GPURUN_REMOTE_PERSIST=10m "$GPURUN" -C "$P" exec true &&
	GPURUN_REMOTE_PERSIST=10m /usr/bin/time -f %M -o "$TRASH/client.rss" "$GPURUN" -C "$P" exec -- wc -c \
		<"$TRASH/stdin.bin" >"$TRASH/wc.out" &&
	test_grep -x $((STDIN_MB << 20)) "$TRASH/wc.out" &&
	CL=$(tail -1 "$TRASH/client.rss") && echo "exec stdin, held: peak RSS gpurun $CL KiB" | tee -a "$TRASH/memory.txt" &&
	at_most "gpurun exec (held)" "$CL" $LIMIT_KIB &&
	HP=$(cat "$XDG_RUNTIME_DIR"/gpurun/*.pid) &&
	HW=$(awk "/VmHWM/ {print \$2}" /proc/$HP/status) &&
	echo "exec stdin, held: peak RSS of the holder $HW KiB" | tee -a "$TRASH/memory.txt" &&
	at_most "connection holder" "$HW" $LIMIT_KIB &&
	rm -f "$TRASH/stdin.bin"
'

# Trees: the peak grows by at most GPURUN_PER_FILE_MAX (AGENT_PER_FILE_MAX,
# AGENT_WALKED_PER_FILE_MAX for the agent's no-op and edit) bytes a file (the slope between a small and a larger tree, first sync,
# no-op and small edit), and stays within 64 MiB + 150 bytes a file.
# (50,000 by default: between 2,000 and 20,000 files the slope wandered
# by 20 bytes a file with the connection's buffers)
N1=2000
N2=${GPURUN_TEST_BIG:+100000}
N2=${N2:-50000}
# tree_case N: first sync, no-op and a small edit (one file changed, one
# added: planned against the last committed state), then one more edit
# with that state lost (.gpurun/remote-KEY removed), and one with it
# stale, and one more where the host changed behind gpurun's back (a file
# edited there, one removed: its changes come, not its manifest); sets
# FIRST_CL FIRST_AG NOOP_CL NOOP_AG EDIT_CL EDIT_AG REPAIR_CL REPAIR_AG
# STALE_CL STALE_AG HOST_CL HOST_AG
tree_case() {
	local p=$TRASH/tree$1
	make_tree "$p" "$1" && write_ini "$p" gpuhost libssh2 "tree$1" &&
	peak_sync "$p" && FIRST_CL=$CL FIRST_AG=$AG &&
	peak_sync "$p" && NOOP_CL=$CL NOOP_AG=$AG &&
	echo "y = 1" >>"$p/src/pkg001/mod1/file_000001.py" && echo new >"$p/src/added.py" &&
	peak_sync "$p" && EDIT_CL=$CL EDIT_AG=$AG &&
	tree_sig "$p" >"$TRASH/a.sig" && tree_sig "$RH/tree$1" >"$TRASH/b.sig" &&
	test_cmp "$TRASH/a.sig" "$TRASH/b.sig" &&
	rm "$p"/.gpurun/remote-* && echo "z = 2" >>"$p/src/pkg002/mod2/file_000002.py" &&
	peak_sync "$p" && REPAIR_CL=$CL REPAIR_AG=$AG &&
	tree_sig "$p" >"$TRASH/a.sig" && tree_sig "$RH/tree$1" >"$TRASH/b.sig" &&
	test_cmp "$TRASH/a.sig" "$TRASH/b.sig" &&
	k=$(ls "$p"/.gpurun/remote-*) && cp "$k" "$TRASH/stale.key" &&
	echo "w = 3" >>"$p/src/pkg003/mod3/file_000003.py" && peak_sync "$p" &&
	cp "$TRASH/stale.key" "$k" && echo "v = 4" >>"$p/src/pkg004/mod0/file_000004.py" &&
	peak_sync "$p" && STALE_CL=$CL STALE_AG=$AG &&
	tree_sig "$p" >"$TRASH/a.sig" && tree_sig "$RH/tree$1" >"$TRASH/b.sig" &&
	test_cmp "$TRASH/a.sig" "$TRASH/b.sig" &&
	echo "host = 1" >>"$RH/tree$1/src/pkg002/mod2/file_000002.py" &&
	rm "$RH/tree$1/src/pkg003/mod3/file_000003.py" &&
	echo "u = 5" >>"$p/src/pkg004/mod0/file_000004.py" &&
	peak_sync "$p" && HOST_CL=$CL HOST_AG=$AG &&
	tree_sig "$p" >"$TRASH/a.sig" && tree_sig "$RH/tree$1" >"$TRASH/b.sig" &&
	test_cmp "$TRASH/a.sig" "$TRASH/b.sig"
}
slope_ok() { # slope_ok WHAT KIB_SMALL KIB_LARGE MAX_BYTES_A_FILE
	local b=$(( ($3 - $2) * 1024 / (N2 - N1) ))
	echo "$1: $b bytes a file ($2 KiB at $N1 files, $3 KiB at $N2)" | tee -a "$TRASH/memory.txt" >&2
	[ "$b" -le "$4" ] || { say "$1: over $4 bytes a file"; return 1; }
	at_most "$1" "$3" $((LIMIT_KIB + N2 * 150 / 1024))
}
test_expect_success "trees: $N1 and $N2 files, peak RSS per file bounded each side" '
	tree_case $N1 && S_FC=$FIRST_CL S_FA=$FIRST_AG S_NC=$NOOP_CL S_NA=$NOOP_AG &&
	S_EC=$EDIT_CL S_EA=$EDIT_AG S_RC=$REPAIR_CL S_RA=$REPAIR_AG S_SC=$STALE_CL S_SA=$STALE_AG &&
	S_HC=$HOST_CL S_HA=$HOST_AG &&
	tree_case $N2 &&
	slope_ok "gpurun, first sync" "$S_FC" "$FIRST_CL" $GPURUN_PER_FILE_MAX &&
	slope_ok "agent, first sync" "$S_FA" "$FIRST_AG" $AGENT_PER_FILE_MAX &&
	slope_ok "gpurun, no-op" "$S_NC" "$NOOP_CL" $GPURUN_NOOP_PER_FILE_MAX &&
	slope_ok "agent, no-op" "$S_NA" "$NOOP_AG" $AGENT_WALKED_PER_FILE_MAX &&
	slope_ok "gpurun, small edit" "$S_EC" "$EDIT_CL" $GPURUN_NOOP_PER_FILE_MAX &&
	slope_ok "agent, small edit" "$S_EA" "$EDIT_AG" $AGENT_WALKED_PER_FILE_MAX &&
	slope_ok "gpurun, state lost" "$S_RC" "$REPAIR_CL" $STATE_LOST_PER_FILE_MAX &&
	slope_ok "agent, state lost" "$S_RA" "$REPAIR_AG" $STATE_LOST_PER_FILE_MAX &&
	slope_ok "gpurun, state stale" "$S_SC" "$STALE_CL" $STATE_LOST_PER_FILE_MAX &&
	slope_ok "agent, state stale" "$S_SA" "$STALE_AG" $STATE_LOST_PER_FILE_MAX &&
	slope_ok "gpurun, host changed" "$S_HC" "$HOST_CL" $GPURUN_NOOP_PER_FILE_MAX &&
	slope_ok "agent, host changed" "$S_HA" "$HOST_AG" $AGENT_WALKED_PER_FILE_MAX
'

# the numbers, for the log
sed -e 's/^/# /' -e "s|$TRASH/||" "$TRASH/memory.txt" 2>/dev/null
test_done
