#!/bin/bash
# Builds of gpurun against each other on bench_sync.sh's 3,000-file first
# sync (its project, loopback through the delay proxy, a new file system
# for each copy), each round also running rsync -az and the durable rsync
# (rsync, then syncfs of its copy), the order turned by one each round. For
# judging a change to the data path before it goes in; not in make bench.
#   BUILDS="old=/tmp/old/build/gpurun new=$PWD/build/gpurun" ROUNDS=12 tests/bench/bench_ab.sh
# Per tool: median wall time, the median of the rounds' own ratios to
# rsync, and the median CPU time of the whole machine during the run
# (/proc/stat: user, system, irq, softirq; both ends share the machine).
BENCH_SYNC_DEFS_ONLY=1 . "$(dirname "$0")/bench_sync.sh"

ROUNDS=${ROUNDS:-8}
BUILDS=${BUILDS:-"gpurun=$GPURUN"}
AB=$TRASH/ab

cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { print int(($2 + $3 + $4 + $7 + $8) * 1000 / hz) }' /proc/stat
}

start_sshd gpuhost || exit 1
trust_sshd gpuhost
make_project
start_proxy loopback "$SSHD_PORT_gpuhost" || exit 1
ssh_host_via vialoopback gpuhost "$PROXY_PORT_loopback"
PROFILE=loopback PROXY=loopback TRANSPORT=libssh2
write_ini "$P" vialoopback libssh2 gp-dst
fresh_remote || exit 1
tools="rsync rsyncd"
for b in $BUILDS; do
	[ -x "${b#*=}" ] || { say "no gpurun at ${b#*=}"; exit 1; }
	"${b#*=}" -C "$P" exec true >/dev/null || exit 1 # each build's agent, once
	tools="$tools ${b%%=*}"
done
: >"$AB"
set -- $tools
for r in $(seq 1 "$ROUNDS"); do
	for k in $(seq 0 $(($# - 1))); do
		t=${@:$(( (k + r - 1) % $# + 1 )):1}
		fresh_remote || exit 1
		c0=$(cpu_ms)
		case $t in
		rsync) measure "ab-$t" run_rsync vialoopback ;;
		rsyncd) measure "ab-$t" run_rsync_durable vialoopback ;;
		*) for b in $BUILDS; do [ "${b%%=*}" != "$t" ] || GPURUN=${b#*=}; done
		   measure "ab-$t" run_gpurun ;;
		esac
		echo "$r $t $(awk 'END { print $3 }' "$OUT") $(($(cpu_ms) - c0))" >>"$AB"
	done
done
printf '\n%-10s %10s %16s %10s\n' tool "ms" "x rsync (rounds)" "CPU ms"
for t in $tools; do
	awk -v t="$t" '$2 == "rsync" { rs[$1] = $3 } $2 == t { ms[$1] = $3 }
		END { for (r in ms) if (ms[r] ~ /^[0-9]+$/ && rs[r] > 0) printf "%.4f\n", ms[r] / rs[r]; else print "failed" }' "$AB" |
		awk '{ v[NR] = $1 } /failed/ { bad = 1 } END { if (bad || !NR) { print "failed"; exit }
			n = asort(v); printf "%.3f\n", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }' >"$TRASH/r"
	printf '%-10s %10s %16s %10s\n' "$t" "$(awk -v t="$t" '$2 == t { print $3 }' "$AB" | median)" \
		"$(cat "$TRASH/r")" "$(awk -v t="$t" '$2 == t { print $4 }' "$AB" | median)"
done
printf '%s rounds; rsyncd: rsync -az, then syncfs of its copy'"'"'s file system; copies on: %s\n' \
	"$ROUNDS" "$(fs_said)"
unmount_all "$TRASH/gpuhost-home"
[ -z "${FAILED:-}" ] || test_failures=1
test_done
