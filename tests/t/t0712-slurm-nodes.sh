#!/bin/bash
# The Slurm backend on a cluster of two nodes made on this machine
# (tests/slurm.sh with SLURM_NODES=2: each slurmd in network, UTS and
# mount namespaces of its own, a bridge in the test's own network
# namespace): one task per node with NODE_RANK; 2 nodes x 2 tasks meeting
# at MASTER_ADDR:MASTER_PORT (a TCP rendezvous that sums every rank's
# number; a real torch.distributed all-reduce too where Debian's
# python3-torch is installed, skipped with why elsewhere); a failing rank
# on the second node named with its node; a stop that gives every rank on
# both nodes its grace; compute nodes that do not see the job's folder (a
# tmpfs over the login node's home in each node's mount namespace); and a
# container job's GPU mode decided on the compute node (a CDI spec there
# only). Also the cluster itself (idle nodes that resolve and reach each
# other, addresses only in their namespaces), every rank's log streamed,
# requeue by Slurm and after a node fails, [slurm] nodes above the
# partition's nodes refused, stop of a pending 2-node job, and teardown.
. "$(dirname "$0")/../slurm.sh"
slurm_netns_enter "$0" "$@"
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../slurm.sh"
. "$(dirname "$0")/../container.sh"

if why=$(slurm_missing); then
	test_skip 'Slurm on two nodes' "$why"
	test_done
fi
if [ -z "${GPURUN_TEST_NETNS:-}" ]; then
	test_skip 'Slurm on two nodes' "${SLURM_NETNS_WHY:-no network namespace for the test}"
	test_done
fi

LH=$TRASH/login-home
start_sshd login "SetEnv HOME=$LH $(slurm_sshd_env)" && trust_sshd login ||
	{ echo "not ok - $TEST_NAME: sshd"; exit 1; }
# A requeued job waits cred_expire seconds before it starts again.
SLURM_CRED_EXPIRE=10 SLURM_NODES=2 slurm_start || { echo "not ok - $TEST_NAME: the cluster did not start"; exit 1; }
set -- $SLURM_NODES_LIST
NA=$1 NB=$2
echo "# two nodes, $NA and $NB, up in $SLURM_START_SECONDS s"

P=$TRASH/proj
mkdir -p "$P"
S=$$
ini() {
	write_ini "$P" login libssh2 proj
	printf 'scheduler = slurm\n[build]\ncommand =\n' >>"$P/gpurun.ini"
	for kv in "$@"; do printf '%s\n' "$kv"; done >>"$P/gpurun.ini"
}
last_id() { head -n1 "$P/.gpurun/jobs" | cut -f1; }
json_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; d=d.get("jobs",[d])[0] if "jobs" in d else d; print(d.get(sys.argv[2],""))' "$1" "$2"; }
wait_grep() {
	for _i in $(seq 1 $((${3:-60} * 10))); do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	say "timed out waiting for '$1' in $2:"; cat "$2" >&2; return 1
}
wait_status() {
	for _i in $(seq 1 $((${3:-60} * 5))); do
		(cd "$P" && "$GPURUN" status --json "$1" >"$TRASH/ws.json" 2>/dev/null) &&
			[ "$(json_field "$TRASH/ws.json" state)" = "$2" ] && return 0
		sleep 0.2
	done
	say "job $1 is not $2:"; cat "$TRASH/ws.json" >&2; return 1
}
T=$TRASH/out && mkdir -p "$T"
sid() { (cd "$P" && "$GPURUN" status --json "$1" >"$TRASH/sid.json") && json_field "$TRASH/sid.json" slurm_id; }
sstate() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# The harness itself: the nodes, their names and addresses, the bridge.
# The test runs in a network namespace of its own (the bridge, 10.77.0.1);
# each node's address is in its namespace only, none is in the host's.
test_expect_success 'the cluster: two idle nodes with gres gpu:2 that resolve and reach each other, addresses only in their namespaces' '
	sinfo -h -N -p "$SLURM_PARTITION" -o "%N %t %G" >$T/sinfo &&
	for nn in $NA $NB; do test_grep -x "$nn idle gpu:2" $T/sinfo || return 1; done &&
	test "$(slurm_node_ns 1 hostname)" = $NA && test "$(slurm_node_ns $NB hostname)" = $NB &&
	slurm_node_ns $NA getent hosts $NB >$T/hosts && test_grep "^10.77.0.3 " $T/hosts &&
	dport=$(sed -n "s/^SlurmdPort=//p" "$SLURM_CONF") &&
	slurm_node_ns $NB bash -c "exec 3<>/dev/tcp/$NA/$dport" &&
	slurm_node_ns $NA ip -o addr >$T/na && test_grep " 10\.77\.0\.2/24 " $T/na &&
	slurm_node_ns $NB ip -o addr >$T/nb && test_grep " 10\.77\.0\.3/24 " $T/nb &&
	! ip -o addr | grep -q "10\.77\.0\.[23]/" &&
	test "$(readlink /proc/$PPID/ns/net)" != "$(readlink /proc/$$/ns/net)" &&
	nsenter -t $PPID -n ip -o addr >$T/host && test_grep " 127\.0\.0\.1/" $T/host &&
	! grep "10\.77\." $T/host &&
	{ timeout 60 srun -N2 --ntasks-per-node=1 hostname >$T/srun ||
		{ say "srun failed once (a loaded machine), again:"; timeout 60 srun -N2 --ntasks-per-node=1 hostname >$T/srun; }; } &&
	sort -o $T/srun $T/srun &&
	printf "%s\n" $NA $NB | sort >$T/want && test_cmp $T/want $T/srun
'

cat >"$P/meet.py" <<'EOF'
# Every rank meets rank 0 at MASTER_ADDR:MASTER_PORT and sends RANK + 1;
# rank 0 sums them and sends the sum back (an all-reduce by hand).
import os, socket, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
host = socket.gethostname()
if rank == 0:
    srv = socket.create_server(("0.0.0.0", port))
    peers = [srv.accept()[0] for _ in range(world - 1)]
    total = 1 + sum(int(p.recv(16)) for p in peers)
    for p in peers:
        p.sendall(str(total).encode())
else:
    for _ in range(200):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.05)
    c.sendall(str(rank + 1).encode())
    total = int(c.recv(16))
print("rank %d of %d local %s node %s on %s: sum %d" % (rank, world, os.environ["LOCAL_RANK"],
      os.environ["NODE_RANK"], host, total), flush=True)
EOF
cat >"$P/ranks.py" <<'EOF'
import os, signal, socket, sys, time
rank = os.environ["RANK"]
def term(sig, frame):
    time.sleep(2)
    print("rank %s on %s checkpointed" % (rank, socket.gethostname()), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("rank %s up" % rank, flush=True)
while True:
    time.sleep(0.1)
EOF

test_expect_success '[slurm] nodes = 2: one task per node with NODE_RANK, on each node' '
	cd "$P" && ini "[train]" "command = echo rank=\$RANK node=\$NODE_RANK of \$WORLD_SIZE on \$(hostname) master \$MASTER_ADDR" \
		"[slurm]" "nodes = 2" &&
	"$GPURUN" -q train >$T/out &&
	test_grep -x "rank=0 node=0 of 2 on $NA master $NA" $T/out &&
	test_grep -x "rank=1 node=1 of 2 on $NB master $NA" $T/out
'

test_expect_success '2 nodes x 2 tasks: the four ranks meet at MASTER_ADDR:MASTER_PORT across nodes' '
	cd "$P" && ini "[train]" "command = python3 meet.py" "[slurm]" "nodes = 2" "ntasks_per_node = 2" &&
	"$GPURUN" -q train >$T/meet &&
	test "$(grep -c ": sum 10\$" $T/meet)" = 4 &&
	test_grep -x "rank 0 of 4 local 0 node 0 on $NA: sum 10" $T/meet &&
	test_grep -x "rank 3 of 4 local 1 node 1 on $NB: sum 10" $T/meet
'

# A real torch.distributed all-reduce (gloo, init_method env://: the
# ranks' variables are all it needs) where Debian's python3-torch is
# installed; the rendezvous above stands in for it elsewhere.
if python3 -c 'import torch.distributed' 2>/dev/null; then
	cat >"$P/allreduce.py" <<'EOF'
import socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print("rank %d of %d on %s: all_reduce %d" % (dist.get_rank(), dist.get_world_size(),
      socket.gethostname(), int(t.item())), flush=True)
dist.destroy_process_group()
EOF
	test_expect_success '2 nodes x 2 tasks: torch.distributed all_reduce (gloo) across nodes' '
		cd "$P" && ini "[train]" "command = python3 allreduce.py" "[slurm]" "nodes = 2" "ntasks_per_node = 2" &&
		"$GPURUN" -q train >$T/ar &&
		test "$(grep -c ": all_reduce 10\$" $T/ar)" = 4 &&
		test_grep -x "rank 3 of 4 on $NB: all_reduce 10" $T/ar
	'
else
	test_skip '2 nodes x 2 tasks: torch.distributed all_reduce (gloo) across nodes' \
		'no torch here (apt install python3-torch); the TCP rendezvous above stands in'
fi

test_expect_success 'logs -f streams every line of every rank, in each rank'"'"'s order' '
	cd "$P" && ini "[train]" "command = i=1; while [ \$i -le 40 ]; do echo \"rank \$RANK line \$i\"; i=\$((i+1)); sleep 0.02; done" \
		"[slurm]" "nodes = 2" "ntasks_per_node = 2" &&
	id=$("$GPURUN" -q train -d) && timeout 180 "$GPURUN" logs -f "$id" >$T/lf 2>$T/lferr &&
	"$GPURUN" logs "$id" >$T/l 2>/dev/null &&
	seq 1 40 >$T/want &&
	for r in 0 1 2 3; do
		for f in $T/lf $T/l; do
			sed -n "s/^rank $r line //p" $f >$T/got && test_cmp $T/want $T/got || return 1
		done
	done
'

test_expect_success 'a rank that fails on the second node: its status is the job'"'"'s, its node named' '
	cd "$P" && ini "[train]" "command = if [ \$RANK = 1 ]; then sleep 1; exit 4; fi; sleep $((S + 1))" \
		"[slurm]" "nodes = 2" &&
	test_expect_code 4 "$GPURUN" train >$T/out 2>$T/err && id=$(last_id) &&
	test_grep "rank 1 on $NB exited with status 4 first" $T/out &&
	"$GPURUN" status --json "$id" >$T/fr.json && json_field $T/fr.json reason >$T/fr &&
	test_grep "rank 1 on $NB failed first (exit 4)" $T/fr &&
	! pgrep -f "^sleep $((S + 1))\$"
'

cat >"$P/limit-$S.py" <<'EOF'
import os, signal, sys, time
rank = os.environ["RANK"]
signal.signal(signal.SIGUSR1, lambda s, f: print("rank %s usr1" % rank, flush=True))
def term(sig, frame):
    print("rank %s term" % rank, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("rank %s up" % rank, flush=True)
while True:
    time.sleep(0.1)
EOF

test_expect_success 'the time limit on two nodes: each rank gets SIGUSR1 then TERM; none runs on outside Slurm' '
	cd "$P" && ini "[train]" "command = python3 limit-$S.py" "[slurm]" "nodes = 2" "time = 0:20" "signal_before = 10" &&
	{ "$GPURUN" train >$T/lim 2>$T/limerr; rc=$?; } ; cat $T/lim $T/limerr >&2;
	test $rc = 247 && test_grep -x "rank 0 usr1" $T/lim && test_grep -x "rank 1 usr1" $T/lim &&
	sleep 3 && ! pgrep -f "python3 limit-$S.py"
'

test_expect_success 'stop: every rank on both nodes gets its grace' '
	cd "$P" && ini "[train]" "command = python3 ranks.py" "stop_grace = 20" "[slurm]" "nodes = 2" &&
	id=$("$GPURUN" -q train -d) &&
	{ "$GPURUN" logs -f "$id" >$T/rk 2>&1 & lpid=$!; } &&
	wait_grep "^rank 0 up\$" $T/rk && wait_grep "^rank 1 up\$" $T/rk &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err && { wait $lpid; true; } &&
	test_grep -x "rank 0 on $NA checkpointed" $T/rk && test_grep -x "rank 1 on $NB checkpointed" $T/rk &&
	wait_status "$id" stopped
'

# A command that counts its runs per rank (in the job's folder, which
# every node sees) and waits in its first run to be requeued.
RUNS='n=$(($(cat runs.$RANK 2>/dev/null || echo 0) + 1)); echo $n >runs.$RANK; echo "r$RANK run $n on $(hostname)"; [ $n = 1 ] && { sleep '$((S + 5))' & wait; }; exit 0'
# two_runs FILE: each run had both ranks, on two hosts.
two_runs() {
	for r in 1 2; do
		test "$(grep -c "^r[01] run $r on " "$1")" = 2 &&
		test "$(sed -n "s/^r[01] run $r on //p" "$1" | sort -u | wc -l)" = 2 || { cat "$1" >&2; return 1; }
	done
}

test_expect_success '[slurm] requeue: a 2-node job Slurm requeues runs again on both nodes' '
	cd "$P" && rm -f runs.* && ini "[train]" "command = $RUNS" "[slurm]" "nodes = 2" "requeue = true" &&
	id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
	{ timeout 180 "$GPURUN" logs -f "$id" >$T/rq 2>$T/rqerr & lpid=$!; } &&
	wait_grep "^r0 run 1 " $T/rq && wait_grep "^r1 run 1 " $T/rq &&
	scontrol requeue "$n" &&
	{ wait $lpid; rc=$?; } && test $rc = 0 &&
	test_grep "Slurm requeued job $n: run 2 starts" $T/rq && two_runs $T/rq &&
	wait_status "$id" done
'

test_expect_success '[slurm] requeue: a node that fails under a 2-node job; it runs again when the node is back' '
	cd "$P" && rm -f runs.* && ini "[train]" "command = $RUNS" "[slurm]" "nodes = 2" "requeue = true" &&
	id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
	{ timeout 180 "$GPURUN" logs -f "$id" >$T/nf 2>$T/nferr & lpid=$!; } &&
	wait_grep "^r0 run 1 " $T/nf && wait_grep "^r1 run 1 " $T/nf &&
	scontrol update nodename=$NB state=down reason=t0712 &&
	slurm_wait_state "$n" PENDING &&
	{ scontrol update nodename=$NB state=resume; true; } &&
	for i in $(seq 1 300); do
		st=$(sinfo -h -n $NB -p "$SLURM_PARTITION" -o %t) && case $st in down*|drain*) ;; *) break ;; esac
		sleep 0.1
	done && echo "node $NB is $st" && case $st in down*|drain*) false ;; esac &&
	{ wait $lpid; rc=$?; } && test $rc = 0 &&
	test_grep "DUE TO NODE FAILURE" $T/nf &&
	test_grep "Slurm requeued job $n: run 2 starts" $T/nf && two_runs $T/nf &&
	wait_status "$id" done
'

# A request the partition can never meet stays pending for ever in Slurm
# (PartitionNodeLimit, or PartitionConfig with --gres): doctor warns, and
# the submit is refused with why.
test_expect_success '[slurm] nodes = 3 on a partition of 2 nodes: doctor warns, train refuses with why' '
	cd "$P" && ini "[train]" "command = touch $TRASH/three-ran" "gpus = 1" "[slurm]" "nodes = 3" &&
	{ "$GPURUN" doctor >$T/doc3 2>&1; true; } &&
	test_grep "partition.*gpu (the default): up, 2 nodes" $T/doc3 &&
	test_grep "warn *nodes *\[slurm\] nodes = 3, but partition gpu has 2 nodes: Slurm will not start the job" $T/doc3 &&
	test_grep "hint: set \[slurm\] nodes to 2 at most" $T/doc3 &&
	! "$GPURUN" train >$T/n3 2>$T/n3err &&
	test_grep "sbatch failed: \[slurm\] nodes = 3, but partition gpu has 2 nodes: Slurm would keep the job pending for ever" $T/n3 &&
	test_grep "hint: set \[slurm\] nodes to 2 at most" $T/n3 &&
	test -z "$(squeue -h -o %i)" && ! test -e $TRASH/three-ran &&
	ini "[train]" "command = true" "[slurm]" "nodes = 2" "partition = $SLURM_PARTITION2" &&
	"$GPURUN" doctor >$T/doc2 2>&1 && ! test_grep "warn *nodes" $T/doc2
'

test_expect_success 'stop of a 2-node job pending behind a job on one node: cancelled, never run' '
	blocker=$(sbatch --parsable -w $NB --exclusive -o /dev/null --wrap "sleep $((S + 6))") &&
	slurm_wait_state "$blocker" RUNNING &&
	cd "$P" && ini "[train]" "command = touch $TRASH/pending-ran" "[slurm]" "nodes = 2" &&
	id=$("$GPURUN" -q train -d) && n=$(sid "$id") &&
	wait_status "$id" queued && test "$(sstate "$n")" = PENDING &&
	"$GPURUN" stop "$id" >$T/out 2>$T/err &&
	test_grep "Slurm job $n: CANCELLED" $T/err &&
	wait_status "$id" stopped && test "$(sstate "$n")" = CANCELLED &&
	scancel "$blocker" && ! test -e $TRASH/pending-ran
'

test_expect_success 'compute nodes that do not see the job folder: the error says so' '
	for p in $SLURM_NODE_PIDS; do nsenter -t "$p" -m mount -t tmpfs none "$LH" || return 1; done &&
	cd "$P" && ini "[train]" "command = echo never" &&
	{ "$GPURUN" train >$T/ns 2>$T/nserr; rc=$?; } &&
	for p in $SLURM_NODE_PIDS; do nsenter -t "$p" -m umount "$LH" || return 1; done &&
	test $rc != 0 && ! test_grep -x never $T/ns &&
	"$GPURUN" status --json "$(last_id)" >$T/ns.json && json_field $T/ns.json reason >$T/nsr &&
	test_grep "before gpurun.s agent ran on $NA.*wrote no .gpurun/slurm-[0-9]*.out here: do the compute nodes see" $T/nsr
'

# [container] image on a compute node that has a CDI spec for
# nvidia.com/gpu while the login node has none: the GPU mode is decided
# where the job runs. The spec (fake devices that set an environment
# variable, as in t0442) is bind-mounted over /var/run/cdi in each node's
# mount namespace only; the login node's /var/run/cdi stays empty (made
# for the test, under t0442's lock, when the host has none).
if ! why=$(container_missing podman) && container_start podman; then
	start_sshd login2 "SetEnv HOME=$LH $(slurm_sshd_env) $(container_env podman)" && trust_sshd login2
	test_expect_success '[container] image: the GPU mode is decided on the compute node (CDI there, none on the login node)' '
		rc=1 && exec 9>/tmp/gpurun-test-cdi.lock && flock -w 600 9 &&
		{ test -d /var/run/cdi || { mkdir -p /var/run/cdi && touch $TRASH/made-cdi-dir; }; } &&
		test_atexit "test -e $TRASH/made-cdi-dir && rmdir /var/run/cdi; exec 9>&- 2>/dev/null" &&
		! ls /var/run/cdi/*.json 2>/dev/null | grep -q . &&
		mkdir -p $TRASH/cdi-node && cat >$TRASH/cdi-node/gpurun-test.json <<-JSON &&
		{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [
		 {"name": "0", "containerEdits": {"env": ["FAKE_CDI_GPU=0"]}},
		 {"name": "1", "containerEdits": {"env": ["FAKE_CDI_GPU=1"]}},
		 {"name": "all", "containerEdits": {"env": ["FAKE_CDI_GPU=all"]}}]}
		JSON
		for p in $SLURM_NODE_PIDS; do nsenter -t "$p" -m mount --bind $TRASH/cdi-node /var/run/cdi || return 1; done &&
		cd "$P" && ini "[train]" "command = echo cdi=\$FAKE_CDI_GPU" "gpus = 1" \
			"[container]" "image = $CONTAINER_IMAGE" "runtime = podman" &&
		sed -i "s/^host = login\$/host = login2/" gpurun.ini &&
		{ "$GPURUN" train >$T/ctr 2>$T/ctrerr; rc=$?; }
		# rc is 1 unless every step up to train went and train did.
		for p in $SLURM_NODE_PIDS; do nsenter -t "$p" -m umount /var/run/cdi; done; exec 9>&-;
		cat $T/ctr >&2; test $rc = 0 &&
		test_grep "GPUs go into the container on $NA by cdi (the login node: none)" $T/ctr &&
		test_grep -x "cdi=[01]" $T/ctr
	'
else
	test_skip '[container] image: the GPU mode is decided on the compute node' "${why:-$CONTAINER_WHY}"
fi

# Last: the teardown test_atexit would do, checked. The daemons, what the
# jobs left and the namespaces' holders are gone, and nothing is left in
# any node's network or mount namespace.
test_expect_success 'teardown: every process the cluster started is gone, nothing left in any node namespace' '
	pids=$(slurm_pids) && test -n "$pids" &&
	nss=$(for p in $SLURM_NODE_PIDS; do readlink /proc/$p/ns/net /proc/$p/ns/mnt; done) &&
	test "$(echo "$nss" | sort -u | wc -l)" = 4 &&
	t0=$(date +%s.%N) && slurm_stop &&
	echo "# teardown: $(echo "$(date +%s.%N) - $t0" | bc) s" >&3 &&
	for p in $pids; do ! kill -0 $p 2>/dev/null || { say "pid $p is alive"; return 1; }; done &&
	for e in /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt; do
		ns=$(readlink $e 2>/dev/null) || continue
		case " $(echo $nss) " in *" $ns "*) say "$e is in a node namespace"; return 1 ;; esac
	done
' 3>&1

test_done
