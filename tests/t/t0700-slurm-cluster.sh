#!/bin/bash
# The test cluster itself (tests/slurm.sh): a one-node Slurm started here,
# reached over the test sshd as a login node, with plain sbatch. Proves
# the harness the Slurm backend's tests stand on, and checks the facts
# they rely on: GPU choice by gres, the states and exit codes Slurm
# reports, KillWait, sacct present and absent, and a stop that leaves
# nothing running.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../slurm.sh"

if why=$(slurm_missing); then
	test_skip 'a one-node Slurm cluster' "$why"
	test_done
fi

start_sshd login "SetEnv HOME=$TRASH/login-home $(slurm_sshd_env)" && trust_sshd login ||
	{ echo "not ok - $TEST_NAME: sshd"; exit 1; }
# on_login CMD...: run on the "login node" over ssh, as the backend will.
on_login() { ssh -F "$HOME/.ssh/config" login "$@"; }
# wait_file FILE [SECONDS]: until FILE is not empty.
wait_file() {
	for _i in $(seq 1 $((${2:-30} * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done
	say "no $1"; return 1
}
# job_field JOBID FIELD: a field of scontrol's record of the job.
job_field() { scontrol -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# A batch script in the login node's home, as the backend writes one into
# the job's folder: it prints its job id and exits with its first argument.
L=$TRASH/login-home
mkdir -p "$L"
printf '#!/bin/sh\necho "hello-$SLURM_JOB_ID"\nexit "$1"\n' >"$L/job.sh"
S=$$

test_expect_success 'a one-node cluster without accounting starts' '
	slurm_start &&
	echo "# cluster up in $SLURM_START_SECONDS s (no accounting)" >&3 &&
	sinfo -h -o "%P %t %G" >info && test_grep "^gpu\* idle gpu:2" info && test_grep "^debug idle" info
' 3>&1

test_expect_success 'sbatch over ssh: the job runs, its output and exit code come back' '
	out=$L/out1 &&
	id=$(on_login sbatch --parsable -o "$out" "$L/job.sh" 3) &&
	case $id in *[!0-9]*|"") false ;; esac &&
	slurm_wait_state "$id" FAILED 60 &&
	test_grep -x "hello-$id" "$out" &&
	test "$(job_field "$id" ExitCode)" = 3:0
'

test_expect_success 'gres picks the fake GPUs: gpu:1 sees one, gpu:2 both' '
	id1=$(sbatch --parsable --gres=gpu:1 -o "$TRASH/g1" --wrap "echo cvd=\$CUDA_VISIBLE_DEVICES") &&
	id2=$(sbatch --parsable --gres=gpu:2 -o "$TRASH/g2" --wrap "echo cvd=\$CUDA_VISIBLE_DEVICES") &&
	slurm_wait_state "$id1" COMPLETED 60 && slurm_wait_state "$id2" COMPLETED 60 &&
	test_grep -x cvd=0 "$TRASH/g1" && test_grep -x cvd=0,1 "$TRASH/g2"
'

test_expect_success 'a job asking for three GPUs is refused' '
	! sbatch --parsable --gres=gpu:3 --wrap true 2>err &&
	test_grep -i "requested node configuration is not available" err
'

# The loop after "wait": sleep's TERM may come first, and dash's "wait"
# then returns 0 at once; the script must not end before the trap runs
# (t0710 says more).
test_expect_success 'scancel: TERM reaches the batch script, the state is CANCELLED' '
	id=$(sbatch --parsable -o "$TRASH/c1" --wrap "trap \"echo got-term; exit 0\" TERM; echo up; sleep $S & wait; while :; do sleep 0.1; done") &&
	slurm_wait_state "$id" RUNNING 60 && wait_file "$TRASH/c1" &&
	scancel "$id" && slurm_wait_state "$id" CANCELLED 60 &&
	test_grep -x got-term "$TRASH/c1" &&
	echo "# scontrol ExitCode of a cancelled job: $(job_field "$id" ExitCode)" >&3
' 3>&1

test_expect_success 'ntasks_per_node=2: srun starts two tasks with their own ranks' '
	id=$(sbatch --parsable --nodes=1 --ntasks-per-node=2 -o "$TRASH/t2" \
		--wrap "srun sh -c \"echo rank=\\\$SLURM_PROCID of \\\$SLURM_NTASKS local=\\\$SLURM_LOCALID\"") &&
	slurm_wait_state "$id" COMPLETED 60 &&
	test_grep -x "rank=0 of 2 local=0" "$TRASH/t2" && test_grep -x "rank=1 of 2 local=1" "$TRASH/t2"
'

test_expect_success 'without accounting, sacct says so' '
	! sacct -n -j 1 >out 2>&1 || test_grep -i "accounting storage is disabled" out &&
	test_grep -i "accounting storage is disabled" out
'

test_expect_success 'slurm_stop ends the daemons and what a job left running' '
	id=$(sbatch --parsable -o "$TRASH/s1" --wrap "setsid sleep $((S + 1)) & echo up; sleep $((S + 2))") &&
	slurm_wait_state "$id" RUNNING 60 && wait_file "$TRASH/s1" &&
	pids="$_slurm_pids" && pgrep -f "^sleep $((S + 1))\$" >/dev/null &&
	slurm_stop &&
	for p in $pids; do ! kill -0 "$p" 2>/dev/null || { say "daemon $p alive"; false; } || return 1; done &&
	! pgrep -f "^sleep $((S + 1))\$" && ! pgrep -f "^sleep $((S + 2))\$"
'

if why=$(slurm_missing_accounting); then
	test_skip 'sacct with mariadb + slurmdbd' "$why"
	test_done
fi

test_expect_success 'a cluster with accounting starts; sacct has the job with its state' '
	slurm_start --accounting &&
	echo "# cluster up in $SLURM_START_SECONDS s (mariadb + slurmdbd)" >&3 &&
	id=$(on_login sbatch --parsable -o /dev/null "$L/job.sh" 4) &&
	slurm_wait_state "$id" FAILED 60 &&
	# slurmdbd can have the job before its end: wait for a final state
	for i in $(seq 1 300); do
		line=$(sacct -n -X -P -j "$id" -o JobID,State,ExitCode) && [ -n "$line" ] &&
			case $line in *"|PENDING|"* | *"|RUNNING|"* | *"|COMPLETING|"*) false ;; esac && break
		sleep 0.1
	done &&
	echo "# sacct had job $id after ~$i tenths of a second: $line" >&3 &&
	test "$line" = "$id|FAILED|4:0" &&
	on_login sacct -n -X -P -j "$id" -o State >st && test_grep -x FAILED st
' 3>&1

test_expect_success 'a cancelled job: scontrol and sacct disagree on ExitCode, agree on the state' '
	id=$(sbatch --parsable -o /dev/null --wrap "sleep $S") &&
	slurm_wait_state "$id" RUNNING 60 && scancel "$id" && slurm_wait_state "$id" CANCELLED 60 &&
	for i in $(seq 1 300); do
		sacct -n -P -j "$id" -o JobID,State,ExitCode >acct && grep -q "^$id|CANCELLED" acct && grep -q "^$id.batch|CANCELLED" acct && break
		sleep 0.1
	done &&
	echo "# cancelled: scontrol $(job_field "$id" ExitCode); sacct $(tr "\n" " " <acct)" >&3 &&
	test_grep "^$id|CANCELLED" acct
' 3>&1

test_done
