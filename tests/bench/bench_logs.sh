#!/bin/bash
# Benchmark: job logs. (1) Log latency: time from a line written by the job
# on the host to it printed locally by `gpurun train`, p50/p99, through the
# delay proxy at 0 and 25 ms one way (target: p50 <= one-way delay + 10 ms),
# for each [train] output in OUTPUTS (default "pty pipe").
# The job stamps each line with its wall clock; the reader stamps arrival
# with the same clock (one machine). (2) Time from `gpurun train` to the
# job's first log line, against the equivalent rsync && ssh script (a
# detached nohup job followed with tail -f, and a plain foreground ssh),
# warm (agent uploaded, tree synced), median of RUNS runs.
#   tests/bench/bench_logs.sh            (make bench calls it)
# (3) Throughput: THRU_MB (default 200; 0 skips) of log output carried
# by `gpurun train` (the job cats it) with [train] output = pty and pipe,
# by `gpurun logs -f` of the running job (started with train -d, pipe),
# and by `gpurun logs JOB` of the ended job, against `ssh host cat` of
# the same file, loopback, median of RUNS, interleaved, with the client's
# peak RSS.
#   RUNS=9 LINES=500 PROFILES=wan TRANSPORT=openssh tests/bench/bench_logs.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/bench_lib.sh"

RUNS=${RUNS:-5}
LINES=${LINES:-300}
PROFILES=${PROFILES:-"loopback wan"}
OUTPUTS=${OUTPUTS:-"pty pipe"}
TRANSPORT=${TRANSPORT:-libssh2} # gpurun's; the peer script always uses ssh
P=$TRASH/proj
RH=$TRASH/gpuhost-home
PY=$TRASH/bench.py

cat >"$PY" <<'PYEOF'
import os, signal, subprocess, sys, time

def latency(cmd, go):
    """Run cmd; lines 'i sent_ns' after 'ready' are timed on arrival."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True)
    buf, lat = b"", []
    while True:
        chunk = os.read(p.stdout.fileno(), 65536)
        now = time.time_ns()
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            f = line.split()
            if f[:1] == [b"ready"]:
                open(go, "w").close()
            elif len(f) == 2 and f[0].isdigit():
                lat.append((now - int(f[1])) / 1e6)
    p.wait()
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print("%d %.1f %.1f %.1f" % (len(lat), pct(0.5), pct(0.99), lat[-1]))

def first_line(cmd):
    """ms from start until a line 'first' is printed; then kill it."""
    t0 = time.time_ns()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    buf = b""
    while b"first\n" not in buf:
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            print("failed"); return
        buf += chunk
    ms = (time.time_ns() - t0) / 1e6
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    print("%.1f" % ms)

if sys.argv[1] == "latency":
    latency(sys.argv[3:], sys.argv[2])
else:
    first_line(sys.argv[2:])
PYEOF


start_sshd gpuhost || exit 1
trust_sshd gpuhost
mkdir -p "$P/src" "$RH/proj"
for i in $(seq 1 50); do echo "print($i)" >"$P/src/m$i.py"; done
cat >"$P/stamp.py" <<'EOF2'
import os, sys, time
n, gap, go = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
for i in range(n):
    print(i, time.time_ns(), flush=True)
    time.sleep(gap)
EOF2
cp -r "$P"/. "$RH/proj/"   # the peers start from a synced tree, as gpurun does
SSHCFG=$HOME/.ssh/config

printf '\nlog latency: %s lines, 20 ms apart, printed by gpurun train (transport %s)\n' "$LINES" "$TRANSPORT"
printf '%-10s %8s %6s %8s %8s %8s %8s\n' profile one-way output lines p50_ms p99_ms max_ms
for prof in $PROFILES; do
	case $prof in loopback) d=0 ;; wan) d=25 ;; *) d=$prof ;; esac
	start_proxy "$prof" "$SSHD_PORT_gpuhost" "$d" && ssh_host_via "via$prof" gpuhost "$(eval echo \$PROXY_PORT_$prof)"
	for out in $OUTPUTS; do
		write_ini "$P" "via$prof" "$TRANSPORT" proj
		printf '[build]\ncommand =\n[artifacts]\npull =\n[train]\ncommand = python3 stamp.py %s 0.02 %s\noutput = %s\n' \
			"$LINES" "$TRASH/go-$prof" "$out" >>"$P/gpurun.ini"
		rm -f "$TRASH/go-$prof"
		r=$(cd "$P" && python3 "$PY" latency "$TRASH/go-$prof" "$GPURUN" -q train)
		set -- $r
		printf '%-10s %8s %6s %8s %8s %8s %8s\n' "$prof" "${d}ms" "$out" "$1" "$2" "$3" "$4"
	done
done

printf '\ntime to the first log line (warm, median of %s)\n' "$RUNS"
printf '%-10s %14s %18s %16s %10s\n' profile "gpurun_train" "rsync+ssh_nohup" "rsync+ssh_fg" "ratio"
for prof in $PROFILES; do
	write_ini "$P" "via$prof" "$TRANSPORT" proj
	printf '[build]\ncommand =\n[artifacts]\npull =\n[train]\ncommand = echo first\n' >>"$P/gpurun.ini"
	(cd "$P" && "$GPURUN" -q train >/dev/null 2>&1) # warm: agent uploaded
	g=$(for i in $(seq 1 "$RUNS"); do (cd "$P" && python3 "$PY" first "$GPURUN" -q train); done | median)
	rs="rsync -az --delete -e 'ssh -F $SSHCFG' ./ via$prof:proj/"
	det="$rs && ssh -F $SSHCFG via$prof 'cd proj && (nohup sh -c \"echo first\" >job.log 2>&1 &) && exec tail -n +1 -f job.log'"
	fg="$rs && ssh -F $SSHCFG via$prof 'cd proj && echo first'"
	(cd "$P" && sh -c "$rs") >/dev/null 2>&1
	n=$(for i in $(seq 1 "$RUNS"); do (cd "$P" && python3 "$PY" first sh -c "$det"); done | median)
	f=$(for i in $(seq 1 "$RUNS"); do (cd "$P" && python3 "$PY" first sh -c "$fg"); done | median)
	printf '%-10s %12sms %16sms %14sms %10s\n' "$prof" "$g" "$n" "$f" \
		"$(ratio "$g" "$n" %.2fx)"
done
echo "(ratio: gpurun train / rsync+ssh_nohup; both start with a sync that finds nothing to send; 'failed': a run printed no first line)"
THRU_MB=${THRU_MB:-200}
if [ "$THRU_MB" -gt 0 ]; then
	big=$RH/big.log
	python3 - "$big" "$THRU_MB" <<'PY'
import random, sys
r = random.Random(1)
with open(sys.argv[1], 'w') as f:
    n, want = 0, int(sys.argv[2]) << 20
    while n < want:
        line = 'step %d loss %.5f lr %.2e tokens/s %d %s\n' % (n, r.random(), r.random(), r.randrange(10**6), 'x' * r.randrange(40))
        f.write(line)
        n += len(line)
PY
	size=$(stat -c %s "$big")
	write_ini "$P" gpuhost "$TRANSPORT" proj
	printf '[build]\ncommand =\n[artifacts]\npull =\n[train]\ncommand = cat %s\n' "$big" >>"$P/gpurun.ini"
	(cd "$P" && "$GPURUN" -q train >/dev/null 2>&1) # warm: agent uploaded, tree synced
	tid=$(head -n1 "$P/.gpurun/jobs" | cut -f1)
	# thru NAME CMD...: "NAME secs bytes_out rss_kb"
	thru() {
		_n=$1; shift
		_t0=$(date +%s%N)
		/usr/bin/time -f %M -o "$TRASH/thru.rss" "$@" >"$TRASH/thru.out" 2>/dev/null
		_t1=$(date +%s%N)
		echo "$_n $(awk -v a="$_t0" -v b="$_t1" 'BEGIN{printf "%.3f", (b-a)/1e9}') $(stat -c %s "$TRASH/thru.out") $(tail -n1 "$TRASH/thru.rss")"
		rm -f "$TRASH/thru.out"
	}
	: >"$TRASH/thru"
	for i in $(seq 1 "$RUNS"); do
		thru ssh_cat ssh -F "$SSHCFG" gpuhost cat "$big" >>"$TRASH/thru"
		thru ssh_tt_cat ssh -tt -F "$SSHCFG" gpuhost cat "$big" >>"$TRASH/thru"
		thru pty_local "$GPURUN_BUILD/tests/pty_cat" "$big" >>"$TRASH/thru"
		thru gpurun_train sh -c "cd '$P' && exec '$GPURUN' -q train" >>"$TRASH/thru"
		thru train_pipe sh -c "cd '$P' && exec '$GPURUN' -q -o train.output=pipe train" >>"$TRASH/thru"
		thru logs_f_pipe sh -c "cd '$P' && id=\$('$GPURUN' -q -o train.output=pipe train -d) && exec '$GPURUN' -q logs -f \$id" >>"$TRASH/thru"
		thru gpurun_logs sh -c "cd '$P' && exec '$GPURUN' -q logs $tid" >>"$TRASH/thru"
	done
	printf '\nlog throughput: %s bytes, loopback, transport %s (median of %s; load: %s)\n' "$size" "$TRANSPORT" "$RUNS" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-14s %8s %8s %14s %10s %10s\n' case secs MB/s bytes_out rss_MiB vs_ssh
	sc=$(awk '$1=="ssh_cat"{print $2}' "$TRASH/thru" | median)
	for n in ssh_cat ssh_tt_cat pty_local gpurun_train train_pipe logs_f_pipe gpurun_logs; do
		t=$(awk -v n=$n '$1==n{print $2}' "$TRASH/thru" | median)
		b=$(awk -v n=$n '$1==n{print $3}' "$TRASH/thru" | median)
		m=$(awk -v n=$n '$1==n{print $4}' "$TRASH/thru" | median)
		printf '%-14s %8s %8s %14s %10s %10s\n' "$n" "$t" "$(awk -v s="$size" -v t="$t" 'BEGIN{printf "%.0f", (t>0) ? s/(t*1e6) : 0}')" \
			"$b" "$(awk -v k="$m" 'BEGIN{printf "%.1f", k/1024}')" \
			"$(awk -v a="$sc" -v b="$t" 'BEGIN{if (b>0) printf "%.2fx", a/b; else print "n/a"}')"
	done
	echo "(vs_ssh: throughput relative to ssh cat, target >= 0.9x; ssh_tt_cat: ssh -tt, the peer with a pty on the host;"
	echo " pty_local: tests/helpers/pty_cat, no network: the kernel's pty alone as the supervisor sets it up, 4 KiB a read;"
	echo " gpurun_train: [train] output = pty, train_pipe: = pipe, logs_f_pipe: train -d, then logs -f of the running job; all three include the no-op sync and the job's start; bytes_out < the log's size means output was lost)"
fi
test_done
