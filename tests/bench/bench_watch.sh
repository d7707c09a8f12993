#!/bin/bash
# Benchmark: live sync, edit -> file on the host. `gpurun sync --watch`
# against its peer in the same run: mutagen is packaged neither by Debian
# (apt-cache policy mutagen: none) nor by PyPI (PyPI's "mutagen" is an
# audio-tag library), so the peer is the usual script: inotifywait
# (Debian's inotify-tools) running rsync -az over ssh with a warm
# ControlMaster after each event. Without inotifywait the peer's row says
# so. Each of EDITS edits (default 100) rewrites one of 10 source files
# with new content, then polls the host's copy every millisecond until it
# holds that content (30 s at most); p50/p99 of those latencies, through
# the delay proxy on loopback and at 50 ms round trip (25 ms each way).
# Also: the watcher's peak RSS (VmHWM) and how many connections it opened.
#   tests/bench/bench_watch.sh      (make bench / tests/bench/run.sh watch)
#   EDITS=20 PROFILES=loopback tests/bench/bench_watch.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

EDITS=${EDITS:-100}
FILES=${FILES:-1000}
PROFILES=${PROFILES:-"loopback wan"}
P=$TRASH/proj
H=$TRASH/gpuhost-home
OUT=$TRASH/results
: >"$OUT"

make_project() {
	python3 - "$P" "$FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
for i in range(n):
    d = os.path.join(root, 'src', 'pkg%02d' % (i % 30))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'm%04d.py' % i), 'w') as f:
        f.write(''.join('x%d = %d\n' % (j, rnd.randint(0, 10**6)) for j in range(rnd.randint(10, 100))))
os.makedirs(os.path.join(root, '.venv', 'lib'), exist_ok=True)
for i in range(200):
    open(os.path.join(root, '.venv', 'lib', 'v%d.py' % i), 'w').write('pass\n')
open(os.path.join(root, '.gitignore'), 'w').write('.venv/\n*.log\n')
PY
}

# edits DST OUTFILE: EDITS edits, each latency (ms, 3 decimals) a line.
edits() {
	python3 - "$P" "$1" "$EDITS" "$2" <<'PY'
import os, sys, time
src, dst, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
lat = []
for i in range(n):
    rel = os.path.join('src', 'pkg00', 'm%04d.py' % ((i % 10) * 30))
    body = ('edited = %d %d\n' % (i, time.time_ns())).encode() * 20
    t0 = time.monotonic_ns()
    with open(os.path.join(src, rel), 'wb') as f:
        f.write(body)
    deadline = t0 + 30 * 10**9
    while True:
        try:
            with open(os.path.join(dst, rel), 'rb') as f:
                if f.read() == body:
                    break
        except OSError:
            pass
        if time.monotonic_ns() > deadline:
            lat.append(None)
            break
        time.sleep(0.001)
    if lat and lat[-1] is None:
        break
    lat.append((time.monotonic_ns() - t0) / 1e6)
    time.sleep(0.2)  # edits apart: each its own burst
with open(out, 'w') as f:
    for v in lat:
        f.write('failed\n' if v is None else '%.3f\n' % v)
PY
}

# pct P FILE: the P-th percentile (nearest rank) of the numbers in FILE.
pct() {
	sort -g "$2" | awk -v p="$1" '$1 !~ /^[0-9.]+$/ { bad = 1 } { v[NR] = $1 }
		END { if (bad || !NR) { print "failed"; exit }
		      k = int((p * NR + 99) / 100); if (k < 1) k = 1; printf "%.0f\n", v[k] }'
}

rss_kib() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }

# The gpurun watcher on PROFILE's proxy.
bench_gpurun() {
	local prof=$1 host=via$1 wpid c0 c1 rss
	write_ini "$P" "$host" libssh2 gp-$prof
	: >"$TRASH/w.err"
	(cd "$P" && exec "$GPURUN" sync --watch 2>"$TRASH/w.err") &
	wpid=$!
	for _i in $(seq 1 600); do grep -q "watching for changes" "$TRASH/w.err" && break; sleep 0.1; done
	grep -q "watching for changes" "$TRASH/w.err" || { say "the watcher did not start:"; cat "$TRASH/w.err" >&2; kill $wpid; return 1; }
	c0=$(awk '$1=="conns"{print $2}' "$TRASH/proxy-$prof.stats")
	edits "$H/gp-$prof" "$TRASH/lat-gpurun-$prof"
	c1=$(awk '$1=="conns"{print $2}' "$TRASH/proxy-$prof.stats")
	rss=$(rss_kib $wpid)
	kill -INT $wpid
	wait $wpid
	echo "$prof gpurun $(pct 50 "$TRASH/lat-gpurun-$prof") $(pct 99 "$TRASH/lat-gpurun-$prof") $((${rss:-0} / 1024)) $((c1 - c0))" >>"$OUT"
}

# The peer: inotifywait, then rsync over a warm ControlMaster, in a loop.
bench_peer() {
	local prof=$1 host=via$1 ppid
	if ! command -v inotifywait >/dev/null; then
		echo "$prof inotifywait+rsync missing missing - -" >>"$OUT"
		return 0
	fi
	local ssh="ssh -F $HOME/.ssh/config -o BatchMode=yes -o ControlMaster=auto -o ControlPath=$TRASH/cm-%C -o ControlPersist=120"
	$ssh -fN "$host" || return 1
	mkdir -p "$H/peer-$prof"
	rsync -az --filter=':- .gitignore' --exclude=/.gpurun/ -e "$ssh" "$P/" "$host:$H/peer-$prof/" || return 1
	(while inotifywait -qq -r -e modify,close_write,create,delete,move --exclude '/(\.git|\.gpurun|\.venv)/' "$P"; do
		rsync -az --filter=':- .gitignore' --exclude=/.gpurun/ -e "$ssh" "$P/" "$host:$H/peer-$prof/"
	done) &
	ppid=$!
	sleep 0.5
	edits "$H/peer-$prof" "$TRASH/lat-peer-$prof"
	pkill -P $ppid 2>/dev/null; kill $ppid 2>/dev/null; wait $ppid 2>/dev/null
	$ssh -O exit "$host" 2>/dev/null
	echo "$prof inotifywait+rsync $(pct 50 "$TRASH/lat-peer-$prof") $(pct 99 "$TRASH/lat-peer-$prof") - -" >>"$OUT"
}

test_expect_success "setup: sshd, proxies (loopback; 25 ms each way), a project of $FILES files" '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy loopback "$SSHD_PORT_gpuhost" 0 && ssh_host_via vialoopback gpuhost "$PROXY_PORT_loopback" &&
	start_proxy wan "$SSHD_PORT_gpuhost" 25 && ssh_host_via viawan gpuhost "$PROXY_PORT_wan" &&
	make_project
'

for prof in $PROFILES; do
	test_expect_success "$prof: $EDITS edits, gpurun sync --watch, then the peer" "
		bench_gpurun $prof && bench_peer $prof
	"
done

echo "# edit -> file on the host, $EDITS edits; ms (p50, p99); peak RSS of the watcher; connections it opened while editing"
printf '%-9s %-18s %8s %8s %9s %6s\n' profile tool p50_ms p99_ms rss_MiB conns
while read -r prof tool p50 p99 rss conns; do
	printf '%-9s %-18s %8s %8s %9s %6s\n' "$prof" "$tool" "$p50" "$p99" "$rss" "$conns"
done <"$OUT"
command -v inotifywait >/dev/null ||
	echo "# peer missing: inotifywait (Debian package inotify-tools) is not installed"
test_done
