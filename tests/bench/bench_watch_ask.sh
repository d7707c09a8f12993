#!/bin/bash
# 300k tiny files, loopback sshd: `gpurun sync` no-op and 10-file edit,
# walked (no watcher) vs asked (a watcher running), and the watcher's own
# edit -> host latency; the watcher as it is (its syncs look only at the
# paths inotify reported) and with GPURUN_WATCH_WALK=1 (every sync walks,
# as before); median of 5 (ms), and the peak RSS (KiB) of the sync command
# (/usr/bin/time) and of the watcher (VmHWM).
#   GPURUN_BUILD=$PWD/build FILES=300000 bash tests/bench/bench_watch_ask.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"
FILES=${FILES:-300000}
# (edit10 writes into folders d7 to d70)
[ "$FILES" -ge 71000 ] || { say "FILES must be at least 71000: the edits go to d7..d70"; exit 1; }
P=$TRASH/proj
R=$TRASH/gpuhost-home/proj
# one LABEL: time one `gpurun -q sync` (ms) and its peak RSS, to $TRASH/LABEL.{ms,rss}
one() {
	local t0 t1
	t0=$(date +%s%N)
	(cd "$P" && /usr/bin/time -f "%M" -o "$TRASH/rss.tmp" "$GPURUN" -q sync) || { say "sync failed"; return 1; }
	t1=$(date +%s%N)
	echo $(( (t1 - t0) / 1000000 )) >>"$TRASH/$1.ms"
	cat "$TRASH/rss.tmp" >>"$TRASH/$1.rss"
}
edit10() { for i in $(seq 1 10); do echo "edit $RANDOM $RANDOM $i" >"$P/d$((i * 7))/f$((i * 13)).txt"; done; }
# latency LABEL: edit 10 files, time until the last one is on the host
# (the watcher's own sync: quiet 100 ms, then the sync), then until idle.
latency() {
	local t0 t1 last=d70/f130.txt
	edit10
	t0=$(date +%s%N)
	for _i in $(seq 1 2000); do cmp -s "$P/$last" "$R/$last" && break; sleep 0.005; done
	t1=$(date +%s%N)
	echo $(( (t1 - t0) / 1000000 )) >>"$TRASH/$1.ms"
	for _i in $(seq 1 200); do sleep 0.1; flock -n "$P/.gpurun/sync.lock" true && break; done
}
start_sshd gpuhost && trust_sshd gpuhost || exit 1
many_files "$P" "$FILES" || exit 1
write_ini "$P" gpuhost libssh2 proj
t0=$(date +%s); (cd "$P" && "$GPURUN" -q sync) || exit 1; echo "first sync: $(( $(date +%s) - t0 )) s" >&2
(cd "$P" && "$GPURUN" -q sync)  # the stat cache settled
for r in 1 2 3 4 5; do one walk-noop; done
for r in 1 2 3 4 5; do edit10; one walk-edit; done
for mode in walkall incr; do
	env=; [ $mode = walkall ] && env=GPURUN_WATCH_WALK=1
	(cd "$P" && exec env $env "$GPURUN" sync --watch 2>"$TRASH/w.err") &
	WPID=$!
	test_atexit "kill $WPID 2>/dev/null"
	for i in $(seq 1 1200); do grep -q "watching for changes" "$TRASH/w.err" && break; sleep 0.1; done
	(cd "$P" && "$GPURUN" -v sync) 2>&1 | grep -q "asked the watcher" || { say "not asked"; exit 1; }
	for r in 1 2 3 4 5; do one ask-noop-$mode; done
	for r in 1 2 3 4 5; do edit10; one ask-edit-$mode; done
	for r in 1 2 3 4 5; do latency watch-edit-$mode; done
	sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$WPID/status >"$TRASH/w-$mode.rss"
	kill -INT $WPID; wait $WPID
done
for k in walk-noop walk-edit ask-noop-walkall ask-edit-walkall ask-noop-incr ask-edit-incr; do
	echo "$k: median $(median <"$TRASH/$k.ms") ms (runs: $(tr '\n' ' ' <"$TRASH/$k.ms")), peak RSS of sync $(median <"$TRASH/$k.rss") KiB"
done
for k in watch-edit-walkall watch-edit-incr; do
	echo "$k (edit -> on the host, incl. 100 ms quiet): median $(median <"$TRASH/$k.ms") ms (runs: $(tr '\n' ' ' <"$TRASH/$k.ms"))"
done
echo "watcher peak RSS (VmHWM): walkall $(cat "$TRASH/w-walkall.rss") KiB, incr $(cat "$TRASH/w-incr.rss") KiB"
cd / && rm -rf "$TRASH"
