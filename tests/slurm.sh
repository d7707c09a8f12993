# A one-node Slurm cluster for the end-to-end tests, started as root
# without systemd, sourced after tests/lib.sh:
#
#   . "$(dirname "$0")/../lib.sh"
#   . "$(dirname "$0")/../slurm.sh"
#   why=$(slurm_missing) && { test_skip 'slurm backend' "$why"; test_done; }
#   slurm_start [--accounting] || ...
#   start_sshd login "SetEnv $(slurm_sshd_env)"
#
# Everything the cluster needs lives under $SLURM_DIR ($TRASH/slurmN): munged with its own
# socket and key, slurm.conf + gres.conf, state and spool folders, logs and
# pid files; its ports come from free_port and its node and cluster names
# hold this shell's pid, so tests running at once on one machine each get a
# cluster of their own. slurm_stop (registered with test_atexit) stops
# exactly the daemons slurm_start started, by pid.
#
# The node has two fake GPUs (gres gpu:2, character devices made with
# mknod under $SLURM_DIR/dev), so --gres=gpu:N sets CUDA_VISIBLE_DEVICES.
# With --accounting, a private mariadb and slurmdbd give sacct; without it
# accounting is off and sacct fails as on a cluster without slurmdbd.
#
# SLURM_NODES=N (N > 1) makes a cluster of N nodes on this one machine:
# each slurmd in a network, UTS and mount namespace of its own (held by a
# sleeping process), a veth pair from it to a bridge in the test's own
# network namespace (slurm_netns_enter: the test runs in a fresh one, so
# the bridge and the 10.77.0.0/24 addresses exist nowhere else), its own
# /etc/hosts and pid folder bind-mounted in its mount namespace, one
# munged reached through the filesystem. Nodes are ${SLURM_NODE}a, b, ...
# (SLURM_NODES_LIST); SLURM_NODE_PIDS holds the processes that hold their
# namespaces (nsenter -t PID -m ... changes what one node sees;
# slurm_node_ns runs a command in them);
# everything is torn down by pid.
#
# SLURM_MIN_JOB_AGE (default 300) is how long scontrol remembers an ended
# job; a small value lets a test see a job only sacct knows.
# SLURM_CRED_EXPIRE (Slurm's default 120) is also how long a requeued job
# waits before it may start again.
#
# Exports SLURM_CONF (the same path for every cluster of a test); sets SLURM_DIR, SLURM_NODE, SLURM_PARTITION
# (the default partition) and SLURM_PARTITION2 (a second one, for
# completions and doctor), SLURM_CLUSTER and SLURM_START_SECONDS.

SLURM_DIR=
# The configuration's folder stays the same across clusters, so an sshd
# started once can point its sessions at it (slurm_sshd_env).
SLURM_ETC=$TRASH/slurm-etc
export SLURM_CONF=$SLURM_ETC/slurm.conf
_slurm_n=0
_slurm_atexit=0
# Generous on a loaded 2-core machine; the cluster is up in about a second.
SLURM_WAIT=${SLURM_WAIT:-60}
_slurm_pids=""

# slurm_missing: prints why no cluster can start here and succeeds, or
# prints nothing and fails when one can.
slurm_missing() {
	if [ "$(id -u)" != 0 ]; then echo "a one-node Slurm cluster needs root"; return 0; fi
	for _b in munged slurmctld slurmd slurmstepd sbatch squeue scontrol scancel srun; do
		command -v "$_b" >/dev/null 2>&1 || [ -x "/usr/sbin/$_b" ] ||
			{ echo "no $_b (install slurmctld slurmd slurm-client munge)"; return 0; }
	done
	return 1
}

# slurm_missing_accounting: the same for --accounting (mariadb + slurmdbd).
slurm_missing_accounting() {
	slurm_missing && return 0
	for _b in slurmdbd mariadbd mariadb-install-db sacct sacctmgr; do
		command -v "$_b" >/dev/null 2>&1 || [ -x "/usr/sbin/$_b" ] ||
			{ echo "no $_b (install slurmdbd mariadb-server)"; return 0; }
	done
	return 1
}

# _slurm_daemon NAME PIDFILE: wait for a forking daemon's pid file, record
# the pid for slurm_stop.
_slurm_daemon() {
	for _i in $(seq 1 $((SLURM_WAIT * 20))); do
		if [ -s "$2" ] && kill -0 "$(cat "$2")" 2>/dev/null; then
			_slurm_pids="$(cat "$2") $_slurm_pids"
			return 0
		fi
		sleep 0.05
	done
	say "slurm: $1 did not start; its log:"
	tail -n 20 "$SLURM_DIR/log/$1.log" >&2 2>/dev/null
	return 1
}

# _slurm_listening NAME PORT PIDFILE: wait until the daemon accepts on
# 127.0.0.1:PORT; fail at once when it died.
_slurm_listening() {
	for _i in $(seq 1 $((SLURM_WAIT * 20))); do
		(exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
		kill -0 "$(cat "$3" 2>/dev/null)" 2>/dev/null || break
		sleep 0.05
	done
	say "slurm: $1 is not listening on port $2; its log:"
	tail -n 20 "$SLURM_DIR/log/$1.log" >&2 2>/dev/null
	return 1
}

# slurm_start [--accounting]
slurm_start() {
	_acct=0
	[ "${1:-}" = --accounting ] && _acct=1
	_t0=$(date +%s.%N)
	# One cluster at a time; a second slurm_start (after slurm_stop) gets
	# fresh names and folders.
	_slurm_n=$((_slurm_n + 1))
	SLURM_DIR=$TRASH/slurm$_slurm_n
	_d=$SLURM_DIR
	SLURM_NODE=grn$$x$_slurm_n
	SLURM_CLUSTER=grc$$x$_slurm_n
	SLURM_PARTITION=gpu
	SLURM_PARTITION2=debug
	mkdir -p "$SLURM_ETC" "$_d/log" "$_d/state" "$_d/spool" "$_d/run" "$_d/dev" \
		"$_d/munge-key" "$_d/munge-run" || return 1
	chmod 0700 "$_d/munge-key" && chmod 0755 "$_d/munge-run" || return 1
	[ "$_slurm_atexit" = 1 ] || { test_atexit slurm_stop; _slurm_atexit=1; }

	# munge: its own key (0700 folder) and socket (0755 folder).
	dd if=/dev/urandom of="$_d/munge-key/munge.key" bs=1024 count=1 2>/dev/null &&
		chmod 0400 "$_d/munge-key/munge.key" || return 1
	_msock=$_d/munge-run/munge.socket
	munged --socket="$_msock" --key-file="$_d/munge-key/munge.key" \
		--pid-file="$_d/munge-run/munged.pid" --log-file="$_d/log/munged.log" \
		--seed-file="$_d/munge-key/munged.seed" --force ||
		{ say "slurm: munged failed"; tail -n 5 "$_d/log/munged.log" >&2; return 1; }
	_slurm_daemon munged "$_d/munge-run/munged.pid" || return 1

	# Two fake GPUs: character devices (like /dev/null) that gres.conf names.
	for _g in 0 1; do
		[ -e "$_d/dev/nvidia$_g" ] || mknod "$_d/dev/nvidia$_g" c 1 3 || return 1
	done

	_ctl_port=$(free_port) _d_port=$(free_port)
	_nodes=${SLURM_NODES:-1}
	_ctl_addr=127.0.0.1
	_node_lines="NodeName=$SLURM_NODE NodeAddr=127.0.0.1 NodeHostname=$(hostname -s) CPUs=8 RealMemory=1000 Gres=gpu:2 State=UNKNOWN"
	_pnodes=$SLURM_NODE
	SLURM_NODES_LIST=$SLURM_NODE
	if [ "$_nodes" -gt 1 ]; then
		_ctl_addr=10.77.0.1
		_node_lines="" _pnodes="" SLURM_NODES_LIST=""
		printf '127.0.0.1 localhost\n10.77.0.1 %s\n' "$(hostname -s)" >"$_d/hosts"
		for _i in $(seq 1 "$_nodes"); do
			_nn=$SLURM_NODE$(printf "\\$(printf %o $((96 + _i)))")
			_node_lines="$_node_lines
NodeName=$_nn NodeAddr=10.77.0.$((_i + 1)) NodeHostname=$_nn CPUs=8 RealMemory=1000 Gres=gpu:2 State=UNKNOWN"
			_pnodes=${_pnodes:+$_pnodes,}$_nn
			SLURM_NODES_LIST="$SLURM_NODES_LIST $_nn"
			printf '10.77.0.%s %s\n' $((_i + 1)) "$_nn" >>"$_d/hosts"
		done
		mkdir -p "$_d/run-node"
		# Before slurmctld: with loopback alone, getaddrinfo() (its
		# AI_ADDRCONFIG) finds no address to listen on.
		ip link add grbr type bridge && ip addr add 10.77.0.1/24 dev grbr &&
			ip link set grbr up || { say "slurm: cannot make the nodes' bridge"; return 1; }
	fi
	if [ "$_acct" = 1 ]; then
		_slurm_start_dbd || return 1
		_acct_lines="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$_dbd_port
AccountingStoragePass=$_msock
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30"
	else
		rm -f "$SLURM_ETC/slurmdbd.conf"
		_acct_lines="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
	fi
	cat > "$SLURM_CONF" <<CONF
ClusterName=$SLURM_CLUSTER
SlurmctldHost=$(hostname -s)($_ctl_addr)
SlurmctldPort=$_ctl_port
SlurmdPort=$_d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$_msock${SLURM_CRED_EXPIRE:+,cred_expire=$SLURM_CRED_EXPIRE}
StateSaveLocation=$_d/state
SlurmdSpoolDir=$_d/spool/%n
SlurmctldPidFile=$_d/run/slurmctld.pid
SlurmdPidFile=$_d/run$([ "$_nodes" -gt 1 ] && echo -node)/slurmd.pid
SlurmctldLogFile=$_d/log/slurmctld.log
SlurmdLogFile=$_d/log/slurmd$([ "$_nodes" -gt 1 ] && echo -%n).log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=${SLURM_MIN_JOB_AGE:-300}
InactiveLimit=0
MailProg=/bin/true
JobCompType=jobcomp/none
$_acct_lines
GresTypes=gpu
$_node_lines
PartitionName=$SLURM_PARTITION Nodes=$_pnodes Default=YES MaxTime=INFINITE State=UP
PartitionName=$SLURM_PARTITION2 Nodes=$_pnodes MaxTime=INFINITE State=UP
CONF
	cat > "$SLURM_ETC/gres.conf" <<CONF
AutoDetect=off
NodeName=$_pnodes Name=gpu File=$_d/dev/nvidia[0-1]
CONF
	# cgroup.conf is read by some plugins even under proctrack/linuxproc.
	printf 'CgroupPlugin=autodetect\n' > "$SLURM_ETC/cgroup.conf"
	mkdir -p "$_d/spool/$SLURM_NODE"

	slurmctld -f "$SLURM_CONF" -i ||
		{ say "slurm: slurmctld failed"; tail -n 20 "$_d/log/slurmctld.log" >&2; return 1; }
	_slurm_daemon slurmctld "$_d/run/slurmctld.pid" || return 1
	_slurm_listening slurmctld "$_ctl_port" "$_d/run/slurmctld.pid" || return 1
	if [ "$_nodes" -gt 1 ]; then
		# (_nodei: the functions called use _i for their own loops.)
		_nodei=0
		for _nn in $SLURM_NODES_LIST; do
			_nodei=$((_nodei + 1))
			_slurm_node_up "$_nn" "10.77.0.$((_nodei + 1))" "$_nodei" || return 1
		done
	else
		slurmd -f "$SLURM_CONF" -N "$SLURM_NODE" ||
			{ say "slurm: slurmd failed"; tail -n 20 "$_d/log/slurmd.log" >&2; return 1; }
		_slurm_daemon slurmd "$_d/run/slurmd.pid" || return 1
	fi

	# Up when every node is idle in the default partition.
	for _nn in $SLURM_NODES_LIST; do
		for _i in $(seq 1 $((SLURM_WAIT * 10))); do
			_st=$(timeout 10 sinfo -h -n "$_nn" -p "$SLURM_PARTITION" -o %t 2>/dev/null)
			[ "$_st" = idle ] && break
			sleep 0.1
		done
		[ "$_st" = idle ] || { say "slurm: node $_nn is '$_st', not idle"; tail -n 20 "$_d"/log/slurmd*.log >&2; return 1; }
	done
	SLURM_START_SECONDS=$(echo "$(date +%s.%N) - $_t0" | bc)
}

# slurm_netns_enter "$0" "$@": at the top of a test that wants a cluster
# of several nodes, before tests/lib.sh: run the test again in a network
# namespace of its own (loopback up), where the nodes' bridge and
# addresses exist and nowhere else. Returns (does not exec) when that
# cannot be done, with SLURM_NETNS_WHY saying why.
slurm_netns_enter() {
	SLURM_NETNS_WHY=""
	if [ -n "${GPURUN_TEST_NETNS:-}" ]; then
		ip link set lo up && return 0
		SLURM_NETNS_WHY="cannot bring loopback up in the test's network namespace"
		return 1
	fi
	if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null ||
		! command -v ip >/dev/null || ! unshare --net --uts --mount true 2>/dev/null; then
		SLURM_NETNS_WHY="needs root, unshare, nsenter and ip, and network namespaces"
		return 1
	fi
	exec env GPURUN_TEST_NETNS=1 unshare --net bash "$@"
}

# _slurm_node_up NAME ADDR I: node NAME in namespaces of its own (net,
# UTS, mount; held by a sleep whose pid goes to slurm_stop), a veth pair
# to the bridge (slurm_start made it), ADDR/24 on its end, its own
# /etc/hosts and slurmd pid folder, then its slurmd.
_slurm_node_up() {
	unshare --net --uts --mount --propagation private sleep 1000000 &
	_np=$!
	_slurm_pids="$_np $_slurm_pids"
	SLURM_NODE_PIDS="${SLURM_NODE_PIDS:-} $_np"
	# (Its own variable: the caller counted its nodes in _i once, and a
	# node whose namespace took a second look under load gave the next
	# node the address after its own: 10.77.0.4 where slurm.conf and the
	# hosts file say .3, and that node never heard from the others.)
	for _nsw in $(seq 1 100); do
		[ "$(readlink /proc/$_np/ns/net 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ] &&
			[ "$(readlink /proc/$_np/ns/net 2>/dev/null)" != "" ] && break
		sleep 0.02
	done
	mkdir -p "$_d/run-$1" "$_d/spool/$1" &&
	ip link add "grv$3" type veth peer name eth0 netns "$_np" &&
	ip link set "grv$3" master grbr up &&
	nsenter -t "$_np" -n -u -m sh -c "hostname '$1' && ip link set lo up &&
		ip addr add '$2/24' dev eth0 && ip link set eth0 up &&
		mount --bind '$_d/hosts' /etc/hosts && mount --bind '$_d/run-$1' '$_d/run-node'" ||
		{ say "slurm: cannot set up node $1's namespaces"; return 1; }
	nsenter -t "$_np" -n -u -m slurmd -f "$SLURM_CONF" -N "$1" ||
		{ say "slurm: slurmd of $1 failed"; tail -n 20 "$_d/log/slurmd-$1.log" >&2; return 1; }
	_slurm_daemon "slurmd-$1" "$_d/run-$1/slurmd.pid"
}

# slurm_node_ns NODE CMD...: run CMD in node NODE's namespaces (net, UTS,
# mount), entered by the pid that holds them; NODE is its name or its
# number (1, 2, ...) in SLURM_NODES_LIST.
slurm_node_ns() {
	_k=0 _nsp=""
	for _nn in $SLURM_NODES_LIST; do
		_k=$((_k + 1))
		[ "$1" = "$_nn" ] || [ "$1" = "$_k" ] || continue
		_nsp=$(echo $SLURM_NODE_PIDS | cut -d" " -f$_k)
	done
	[ -n "$_nsp" ] || { say "slurm: no node '$1'"; return 1; }
	shift
	nsenter -t "$_nsp" -n -u -m "$@"
}

# slurm_pids: the processes slurm_start started (daemons, namespace
# holders) that slurm_stop ends.
slurm_pids() { echo $_slurm_pids; }

# mariadb on a free port with its data under $SLURM_DIR, then slurmdbd.
_slurm_start_dbd() {
	_db=$_d/mariadb
	mkdir -p "$_db/data" "$_db/run"
	_db_port=$(free_port) _dbd_port=$(free_port)
	mariadb-install-db --no-defaults --user=root --datadir="$_db/data" \
		--auth-root-authentication-method=normal --skip-test-db >"$_d/log/mariadb-install.log" 2>&1 ||
		{ say "slurm: mariadb-install-db failed"; tail -n 20 "$_d/log/mariadb-install.log" >&2; return 1; }
	mariadbd --no-defaults --user=root --datadir="$_db/data" --socket="$_db/run/mysqld.sock" \
		--pid-file="$_db/run/mysqld.pid" --port="$_db_port" --bind-address=127.0.0.1 \
		--log-error="$_d/log/mariadb.log" --skip-log-bin --innodb-buffer-pool-size=16M \
		--innodb-log-file-size=8M --skip-name-resolve >/dev/null 2>&1 &
	_slurm_daemon mariadb "$_db/run/mysqld.pid" || return 1
	for _i in $(seq 1 $((SLURM_WAIT * 10))); do
		mariadb --no-defaults -uroot --socket="$_db/run/mysqld.sock" -e 'select 1' >/dev/null 2>&1 && break
		sleep 0.1
	done
	cat > "$SLURM_ETC/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$_msock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$_dbd_port
SlurmUser=root
PidFile=$_d/run/slurmdbd.pid
LogFile=$_d/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$_db_port
StorageUser=root
StorageLoc=slurm_acct_db
CONF
	chmod 600 "$SLURM_ETC/slurmdbd.conf"
	# slurmdbd has no -f: it reads slurmdbd.conf next to $SLURM_CONF.
	SLURM_CONF=$SLURM_ETC/slurm.conf slurmdbd ||
		{ say "slurm: slurmdbd failed"; tail -n 20 "$_d/log/slurmdbd.log" >&2; return 1; }
	_slurm_daemon slurmdbd "$_d/run/slurmdbd.pid" || return 1
	# Its pid file comes before it listens, and a slurmctld that finds no
	# slurmdbd at its first start exits ("no TRES from it").
	_slurm_listening slurmdbd "$_dbd_port" "$_d/run/slurmdbd.pid"
}

# slurm_sshd_env: the SetEnv words an sshd for the login node needs (its
# sessions get no SLURM_CONF otherwise): pass to start_sshd's EXTRA as
# "SetEnv HOME=... $(slurm_sshd_env)" — sshd keeps the first SetEnv line.
slurm_sshd_env() { printf 'SLURM_CONF=%s' "$SLURM_CONF"; }

# slurm_wait_state JOBID STATE [SECONDS]: until squeue/scontrol says STATE.
slurm_wait_state() {
	for _i in $(seq 1 $((${3:-30} * 10))); do
		_s=$(scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
		[ "$_s" = "$2" ] && return 0
		sleep 0.1
	done
	say "job $1 is '$_s', not $2"; return 1
}

# slurm_stop: end the jobs left on this cluster, then the daemons that
# slurm_start started (by pid: TERM, then KILL after 10 s), then what a
# job left behind: a slurmstepd or a job's process outlives slurmd, and
# under proctrack/linuxproc a job's setsid child outlives scancel. They are
# found by this cluster's own marks (SLURM_CONF in a slurmstepd's
# environment, SLURM_CLUSTER_NAME in a job's), never by a name alone.
slurm_stop() {
	[ -n "$_slurm_pids" ] || return 0
	if [ -f "${SLURM_CONF:-}" ] && kill -0 "$(cat "$SLURM_DIR/run/slurmctld.pid" 2>/dev/null)" 2>/dev/null; then
		_w=$(echo ${SLURM_NODES_LIST:-$SLURM_NODE} | tr ' ' ,)
		timeout 10 scancel --full -w "$_w" >/dev/null 2>&1
		for _i in $(seq 1 100); do
			[ -z "$(timeout 10 squeue -h -w "$_w" -o %i 2>/dev/null)" ] && break
			sleep 0.1
		done
	fi
	_slurm_kill $_slurm_pids
	_slurm_pids=""
	_slurm_kill $(_slurm_leftovers)
}

# _slurm_kill PID...: TERM, then KILL what is alive after 10 s.
_slurm_kill() {
	[ $# -gt 0 ] || return 0
	kill "$@" 2>/dev/null
	for _i in $(seq 1 100); do
		_alive=""
		for _p in "$@"; do kill -0 "$_p" 2>/dev/null && _alive="$_alive $_p"; done
		[ -z "$_alive" ] && return 0
		sleep 0.1
	done
	kill -9 $_alive 2>/dev/null
}

# _slurm_leftovers: pids of this cluster's slurmstepds and job processes.
_slurm_leftovers() {
	for _e in /proc/[0-9]*/environ; do
		_p=${_e#/proc/}
		_p=${_p%/environ}
		[ "$_p" = $$ ] && continue
		case $(cat "/proc/$_p/comm" 2>/dev/null) in
		slurmstepd) _mark=SLURM_CONF=$SLURM_CONF ;;
		*) _mark=SLURM_CLUSTER_NAME=$SLURM_CLUSTER ;;
		esac
		{ tr '\0' '\n' <"$_e" | grep -qxF "$_mark"; } 2>/dev/null && echo "$_p"
	done
}
