#!/bin/bash
# A GPU host shared by several accounts (issue 11): two real local users,
# made here, reached through the real sshd with their own homes. What one
# syncs is not readable by the other; a folder the other can change is
# refused before anything of theirs runs; GPU locks keep the two users'
# jobs apart and cannot be taken over; a GPU another user's process is on
# is the last one picked. Permission checks bite only non-root users, so
# everything on the host runs as the two accounts.
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
	test_skip 'two accounts on one host' 'needs root, useradd and runuser to make real accounts'
	test_done
fi
make_user A a || { say "useradd failed"; exit 1; }
make_user B b || { say "useradd failed"; exit 1; }
AH=$(getent passwd "$A" | cut -d: -f6) BH=$(getent passwd "$B" | cut -d: -f6)
AUID=$(id -u "$A")
# Shared by the accounts: the GPU lock folder (as root would make it) and
# the fake nvidia-smi with its list of GPU processes.
SH=$(mktemp -d /tmp/gpurun-shared.XXXXXX)
test_atexit "rm -rf '$SH'"
chmod 755 "$SH"
mkdir "$SH/locks" && chmod 1777 "$SH/locks"
cp "$TOP/tests/data/nvidia-smi/fake-nvidia-smi" "$TOP/tests/data/nvidia-smi/gpus.csv" "$SH/"
chmod 755 "$SH/fake-nvidia-smi" && : >"$SH/apps.csv" && chmod 644 "$SH/gpus.csv" "$SH/apps.csv"
start_sshd_users box "SetEnv GPURUN_LOCK_DIR=$SH/locks GPURUN_NVIDIA_SMI=$SH/fake-nvidia-smi FAKE_SMI_APPS=$SH/apps.csv" \
	"$A" "$B" || exit 1
trust_sshd box
as() { _who=$1; shift; runuser -u "$_who" -- sh -c "$*"; }
# proj DIR USER [LINES...]: a local project synced to USER's account.
proj() {
	_d=$TRASH/$1 _u=$2
	shift 2
	mkdir -p "$_d"
	printf '[remote]\nhost = box-%s\n' "$_u" >"$_d/gpurun.ini"
	for _l in "$@"; do printf '%s\n' "$_l"; done >>"$_d/gpurun.ini"
	printf '[build]\ncommand =\n' >>"$_d/gpurun.ini"
}
mode() { stat -c %a "$1"; }

test_expect_success 'a new project folder is 0700 and synced files keep only their owner bits' '
	proj pa "$A" && cd pa && echo SECRET=1 >.env && chmod 644 .env &&
	printf "#!/bin/sh\necho hi\n" >run.sh && chmod 755 run.sh && mkdir sub && echo x >sub/f &&
	"$GPURUN" -q sync && R=$AH/gpurun/pa &&
	test "$(mode "$AH/gpurun")" = 700 && test "$(mode "$R")" = 700 &&
	test "$(mode "$R/.env")" = 600 && test "$(mode "$R/run.sh")" = 700 &&
	test "$(mode "$R/sub")" = 700 && test "$(stat -c %U "$R/.env")" = "$A" &&
	"$GPURUN" exec -- ./run.sh >out && test_grep -x hi out &&
	! as "$B" "cat $R/.env" >out 2>&1 && ! grep SECRET out
'

test_expect_success 'the other account cannot read it even when the home is open to all' '
	chmod 755 "$AH" && ! as "$B" "ls $AH/gpurun/pa" >out 2>&1 && ! grep -q env out
'

test_expect_success 'an agent folder another account can write is refused before anything runs from it' '
	cd "$TRASH/pa" && "$GPURUN" -q exec true && C=$AH/.cache/gpurun &&
	ag=$(ls -d "$C"/agent-* | head -n 1) && test -x "$ag" &&
	chmod 755 "$AH/.cache" && chgrp "$B" "$C" && chmod 775 "$C" &&
	as "$B" "rm -f $ag && printf \"#!/bin/sh\\ntouch $SH/locks/pwned\\n\" >$ag && chmod 755 $ag" &&
	! "$GPURUN" exec true 2>err && ! test -e "$SH/locks/pwned" &&
	test_grep "refusing to run the agent on .*: .$C. can be written by another user" err &&
	rm -f "$ag" && chgrp "$A" "$C" && chmod 700 "$C" &&
	chmod 775 "$AH/.cache" && ! "$GPURUN" exec true 2>err && chmod 755 "$AH/.cache" &&
	test_grep "refusing to run the agent on .*: .$AH/.cache. can be written by another user" err &&
	"$GPURUN" -q exec true && test "$(stat -c %U "$ag")" = "$A" && ! test -e "$SH/locks/pwned"
'

test_expect_success '[sync] preserve_perms = true keeps group and other bits' '
	proj pp "$A" "[sync]" "preserve_perms = true" && cd pp && echo open >readme &&
	chmod 644 readme && mkdir d && echo y >d/y && chmod 640 d/y &&
	"$GPURUN" -q sync && R=$AH/gpurun/pp &&
	test "$(mode "$R")" = 700 && test "$(mode "$R/readme")" = 644 &&
	test "$(mode "$R/d")" = 755 && test "$(mode "$R/d/y")" = 640
'

test_expect_success 'a folder another user owns is refused; the GNUmakefile planted there never runs' '
	mkdir "$SH/bobs" && chmod 1777 "$SH/bobs" &&
	as "$B" "mkdir -m 777 $SH/bobs/proj && printf \"all:\\n\\ttouch $SH/pwned\\n\" >$SH/bobs/proj/GNUmakefile" &&
	proj pv "$A" "path = $SH/bobs/proj" "[train]" "command = true" &&
	sed -i "s|^command =\$|command = make|" "$TRASH/pv/gpurun.ini" && cd pv &&
	test_expect_code 253 "$GPURUN" train 2>err &&
	test_grep "refusing remote folder .$SH/bobs/proj.: .$SH/bobs/proj. belongs to $B" err &&
	test_grep "use a folder of your own" err &&
	test_expect_code 251 "$GPURUN" exec -- make 2>err && test_grep "belongs to $B" err &&
	! test -e "$SH/pwned"
'

test_expect_success 'a parent writable by others is refused before anything is made in it; sticky is fine' '
	mkdir "$SH/open" && chmod 777 "$SH/open" &&
	proj po "$A" "path = $SH/open/alice-proj" && cd po && echo z >z &&
	test_expect_code 253 "$GPURUN" sync 2>err &&
	test_grep "is writable by group and others (mode 0777)" err &&
	test_grep "fix: chmod go-w .$SH/open. (or chmod +t, as /tmp has)" err &&
	! test -e "$SH/open/alice-proj" &&
	chmod 1777 "$SH/open" && "$GPURUN" -q sync &&
	test "$(stat -c "%U %a" "$SH/open/alice-proj")" = "$A 700"
'

test_expect_success 'a project folder its group may write is refused, with the fix' '
	chmod 770 "$SH/open/alice-proj" && cd po &&
	test_expect_code 253 "$GPURUN" sync 2>err &&
	test_grep "is writable by its group (mode 0770).*fix: chmod go-w .$SH/open/alice-proj." err &&
	chmod 700 "$SH/open/alice-proj" && "$GPURUN" -q sync
'

GPUJOB='command = echo gpu=$CUDA_VISIBLE_DEVICES; while ! test -e '$SH'/go; do sleep 0.1; done'

test_expect_success 'two accounts asking for one GPU each get different GPUs; a third job waits' '
	rm -f "$SH/go" && proj ga "$A" "[train]" "$GPUJOB" "gpus = 1" && proj gb "$B" "[train]" "$GPUJOB" "gpus = 1" &&
	a=$(cd ga && "$GPURUN" -q train --detach) && b=$(cd gb && "$GPURUN" -q train --detach) &&
	for i in $(seq 1 100); do
		(cd ga && "$GPURUN" logs "$a") >la; (cd gb && "$GPURUN" logs "$b") >lb
		grep -q gpu= la && grep -q gpu= lb && break; sleep 0.2
	done &&
	test_grep -x "gpu=[01]" la && test_grep -x "gpu=[01]" lb && ! test_cmp la lb &&
	c=$(cd ga && "$GPURUN" -q train --detach) &&
	for i in $(seq 1 100); do (cd ga && "$GPURUN" logs "$c") >lc; grep -q waiting lc && break; sleep 0.2; done &&
	test_grep "queued: 1st, waiting for 1 GPU held by job $b ($B)\|queued: 1st, waiting for 1 GPU held by job $a" lc &&
	(cd ga && "$GPURUN" status) >st && test_grep "$B:$b" st && test_grep "queued" st &&
	echo "$a $b $c" >"$TRASH/gpujobs"
'

test_expect_success 'no account can remove, rename or replace another one'"'"'s lock' '
	L=$SH/locks/gpurun-locks-$AUID && test "$(stat -c "%U %a" "$L")" = "$A 755" &&
	f=$(ls "$L"/gpu-*.lock | head -n1) && test "$(stat -c "%U %a" "$f")" = "$A 644" &&
	! as "$B" "rm -f $f" 2>/dev/null && test -e "$f" &&
	! as "$B" "mv $L $SH/locks/stolen" 2>/dev/null && test -d "$L" &&
	! as "$B" "rm -rf $L" 2>/dev/null && test -e "$f" &&
	! as "$B" "echo x >$L/gpu-9.lock" 2>/dev/null &&
	! as "$B" "ln -s /dev/null $SH/locks/gpurun-locks-$AUID" 2>/dev/null
'

test_expect_success 'when the GPUs free up, the waiting job gets one' '
	read a b c <"$TRASH/gpujobs" && touch "$SH/go" &&
	(cd ga && "$GPURUN" logs -f "$c") >lc && test_grep -x "gpu=[01]" lc
'

HOLD='command = echo gpu=$CUDA_VISIBLE_DEVICES; while ! test -e '$SH'/go-$NAME; do sleep 0.05; done'
# wait_queued DIR JOB: until status in DIR shows JOB queued
wait_queued() {
	for _i in $(seq 1 200); do
		(cd "$1" && "$GPURUN" status) >"$TRASH/wq" 2>/dev/null && grep -q "job $2 is queued" "$TRASH/wq" && return 0
		sleep 0.1
	done
	cat "$TRASH/wq" >&2; return 1
}

test_expect_success 'the line for GPUs is one for both accounts: bob'"'"'s 2-GPU job is not passed by alice'"'"'s later 1-GPU job' '
	proj qa "$A" "[train]" "$HOLD" "gpus = 2" && proj qb "$B" "[train]" "$HOLD" "gpus = 2" &&
	x=$(cd qa && "$GPURUN" -q train --env NAME=x --detach) &&
	for i in $(seq 1 100); do (cd qa && "$GPURUN" logs "$x") >lx; grep -q gpu= lx && break; sleep 0.1; done &&
	y=$(cd qb && "$GPURUN" -q train --env NAME=y --detach) && wait_queued qb "$y" &&
	z=$(cd qa && "$GPURUN" -q -o train.gpus=1 train --env NAME=z --detach) && wait_queued qa "$z" &&
	(cd qa && "$GPURUN" status) >st &&
	test_grep "job $z is queued (2nd in line): behind job $y ($B), which waits for 2 GPUs" st &&
	(cd qa && "$GPURUN" logs "$z") >lz && test_grep "queued: 2nd, behind job $y ($B)" lz &&
	(cd qb && "$GPURUN" status) >st && test_grep "job $y is queued (1st in line): waiting for 2 GPUs held by job $x ($A)" st &&
	touch "$SH/go-x" &&
	(cd qb && for i in $(seq 1 100); do "$GPURUN" logs "$y" | grep -q gpu= && break; sleep 0.1; done) &&
	(cd qb && "$GPURUN" logs "$y") >ly && test_grep -x "gpu=0,1" ly &&
	(cd qa && "$GPURUN" status) >st && test_grep "job $z is queued (1st in line)" st &&
	touch "$SH/go-y" &&
	touch "$SH/go-z" && (cd qa && "$GPURUN" logs -f "$z") >lz && test_grep -x "gpu=[01]" lz &&
	! ls "$SH"/locks/gpurun-locks-*/queue-* 2>/dev/null
'

test_expect_success 'a GPU another user'"'"'s process is on is not picked while an idle one is free' '
	rm -f "$SH/go" && pid=$(as "$B" "sleep 300 >/dev/null 2>&1 & echo \$!") &&
	echo "$pid, GPU-6f0e5b2a-1c1d-4a1e-9a0e-2b7f0c6a0001, 1000, python" >"$SH/apps.csv" &&
	proj g1 "$A" "[train]" "command = echo gpu=\$CUDA_VISIBLE_DEVICES" "gpus = 1" && cd g1 &&
	"$GPURUN" -q train >out && test_grep -x gpu=1 out &&
	echo "$pid, GPU-6f0e5b2a-1c1d-4a1e-9a0e-2b7f0c6a0002, 1000, python" >"$SH/apps.csv" &&
	"$GPURUN" -q train >out && test_grep -x gpu=0 out &&
	kill "$pid" && : >"$SH/apps.csv"
'

test_expect_success 'a lock folder squatted under another user'"'"'s name fails that user'"'"'s jobs, loudly' '
	C=$(id -u "$B") && rm -rf "$SH/locks/gpurun-locks-$C" &&
	as "$A" "mkdir -m 755 $SH/locks/gpurun-locks-$C" &&
	proj gs "$B" "[train]" "command = echo ran" "gpus = 1" && cd gs &&
	test_expect_code 1 "$GPURUN" -q train >out 2>err &&
	test_grep "gpurun-locks-$C. is not yours; ask root to remove it" out &&
	! grep -qx ran out
'

test_done
