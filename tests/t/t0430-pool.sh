#!/bin/bash
# Host pools (issue 34): [remote] host = box1 box2 box3, three real sshd
# "boxes" on loopback, each with its own home, its own GPU locks and its
# own recorded nvidia-smi (2, 4 and 1 GPUs), and a second account on box2.
# train picks a box with the GPUs free now (the one that fits best,
# where the project was synced first), else the one with the shortest
# line; status shows every box's jobs and GPUs in one table; logs, stop,
# pull, rm and exec find the job's box by id or name; another account's
# job on a box is seen and waited for; a box that does not answer is
# named and the others go on.
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || { test_skip 'a pool of three boxes' 'needs root for the second account'; test_done; }

P=$TRASH/proj
mkdir -p "$P"
# What a box's accounts share (as root would make it): its GPU lock
# folder and its recorded nvidia-smi.
SH=$(mktemp -d /tmp/gpurun-shared.XXXXXX)
test_atexit "rm -rf '$SH'"
chmod 755 "$SH"
# box NAME NGPUS: its fake nvidia-smi and lock folder, then its sshd.
box() {
	mkdir -p "$SH/smi-$1" "$SH/locks-$1"
	chmod 1777 "$SH/locks-$1"
	cp "$TOP/tests/data/nvidia-smi/fake-nvidia-smi" "$SH/smi-$1/"
	for i in $(seq 0 $(($2 - 1))); do
		printf '%s, GPU-%s-000%s, NVIDIA H100 80GB HBM3, 0, 1, 81559\n' "$i" "$1" "$i"
	done > "$SH/smi-$1/gpus.csv"
	chmod -R a+rX "$SH/smi-$1"
	start_sshd "$1" "SetEnv HOME=$TRASH/$1-home $(boxenv "$1")" && trust_sshd "$1"
}
boxenv() { echo "GPURUN_LOCK_DIR=$SH/locks-$1 GPURUN_NVIDIA_SMI=$SH/smi-$1/fake-nvidia-smi"; }
box box1 2 && box box2 4 && box box3 1 || { say "could not start the boxes"; exit 1; }
# A second account on box2, with its own project.
make_user U u || { say "useradd failed"; exit 1; }
start_sshd_users box2x "SetEnv $(boxenv box2)" "$U" && trust_sshd box2x || exit 1
mkdir -p "$TRASH/theirs"
printf '[remote]\nhost = box2x-%s\n[build]\ncommand =\n[train]\ngpus = 4\ncommand = while ! test -e %s/go-theirs; do sleep 0.05; done\n' \
	"$U" "$SH" > "$TRASH/theirs/gpurun.ini"

cat > "$P/gpurun.ini" <<INI
[remote]
host = box1 box2 box3
path = proj
connect_timeout = 5
[build]
command =
[artifacts]
pull = where
interval = 0
[train]
gpus = 2
command = echo on \$GPURUN_LOCK_DIR gpu=\$CUDA_VISIBLE_DEVICES; echo \$GPURUN_LOCK_DIR >where; while ! test -e $TRASH/go-\$NAME; do sleep 0.05; done
INI
echo 'print(1)' > "$P/train.py"
stop_all() {
	for h in box1 box2 box3; do
		(cd "$P" && "$GPURUN" --host "$h" status --all 2>/dev/null |
			awk '$2 == "running" || $2 == "queued" { print $1 }' |
			while read -r j; do "$GPURUN" --host "$h" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
	done
}
test_atexit stop_all
# wait_state ID STATE: through the pool
wait_state() {
	for _i in $(seq 1 200); do
		(cd "$P" && "$GPURUN" -q status --json "$1") >"$TRASH/ws.json" 2>/dev/null &&
			grep -q "\"state\": \"$2\"" "$TRASH/ws.json" && return 0
		sleep 0.1
	done
	say "job $1 did not reach $2:"; cat "$TRASH/ws.json" >&2; return 1
}

test_expect_success 'status of a pool: every box answers, its GPUs in one table' '
	cd "$P" && "$GPURUN" status >st 2>err &&
	test_grep "no jobs" st && ! test -s err &&
	test_grep -E "^HOST +GPU +NAME" st &&
	test "$(grep -c "^box1 " st)" = 2 && test "$(grep -c "^box2 " st)" = 4 &&
	test "$(grep -c "^box3 " st)" = 1 &&
	"$GPURUN" status --json >sj &&
	python3 -c "import json,sys; d=json.load(open(\"sj\")); assert [h[\"host\"] for h in d[\"hosts\"]] == [\"box1\",\"box2\",\"box3\"], d; assert len(d[\"gpus\"]) == 7; assert all(h[\"error\"] is None for h in d[\"hosts\"])"
'

test_expect_success 'train picks the box that fits best (2 GPUs: box1), then the next (box2)' '
	cd "$P" && a=$("$GPURUN" train --env NAME=a --name first --detach 2>ea) &&
	test_grep "on box1: 2 of its 2 GPUs free" ea &&
	wait_state "$a" running &&
	b=$("$GPURUN" train --env NAME=b --detach 2>eb) &&
	test_grep "on box2: 4 of its 4 GPUs free" eb &&
	wait_state "$b" running &&
	"$GPURUN" status >st &&
	test_grep -E "^$a +running +first +box1 " st &&
	test_grep -E "^$b +running +- +box2 " st &&
	test_grep -E "^box1 +0 .* $a" st && test_grep -E "^box2 +1 .* $b" st &&
	echo "$a $b" >ids
'

test_expect_success 'logs, status and exec find the job on its box, by name or id' '
	cd "$P" && read -r a b <ids &&
	"$GPURUN" logs first >la && test_grep "on $SH/locks-box1 gpu=0,1" la &&
	"$GPURUN" logs "$b" >lb && test_grep "on $SH/locks-box2 gpu=" lb &&
	"$GPURUN" status first >sa && test_grep -E "^host +box1" sa &&
	"$GPURUN" -q pull first && test_grep -x "$SH/locks-box1" "runs/$a/where" &&
	"$GPURUN" exec -- sh -c "echo \$GPURUN_LOCK_DIR" >ex 2>exerr &&
	test_grep -x "$SH/locks-box2" ex && test_grep "on box2, the pool.s host of the latest job" exerr &&
	"$GPURUN" --host box3 status >s3 && test_grep "no jobs" s3
'

test_expect_success 'no box has the GPUs free: the job goes where the line is shortest' '
	cd "$P" && read -r a b <ids &&
	c=$("$GPURUN" -o train.gpus=4 train --env NAME=c --detach 2>ec) &&
	test_grep "shortest (0 waiting)" ec && test_grep "on box2" ec &&
	wait_state "$c" queued &&
	d=$("$GPURUN" -o train.gpus=2 train --env NAME=d --detach 2>ed) &&
	test_grep "on box1, whose line is shortest (0 waiting)" ed &&
	wait_state "$d" queued &&
	"$GPURUN" status >st && test_grep "job $c is queued (1st in line)" st &&
	test_grep "job $d is queued (1st in line)" st &&
	touch "$TRASH/go-a" && wait_state "$d" running &&
	"$GPURUN" stop "$b" >/dev/null 2>&1 && wait_state "$c" running &&
	"$GPURUN" logs "$c" >lc && test_grep "on $SH/locks-box2 gpu=0,1,2,3" lc &&
	touch "$TRASH/go-c" "$TRASH/go-d" && wait_state "$c" done && wait_state "$d" done
'

test_expect_success 'where the project was synced goes first among the boxes that fit' '
	cd "$P" && e=$("$GPURUN" -o train.gpus=1 train --env NAME=e --detach 2>ee) &&
	test_grep "the project synced there" ee && ! test_grep "on box3" ee &&
	touch "$TRASH/go-e" && wait_state "$e" done
'

test_expect_success 'sync goes to each box in turn' '
	cd "$P" && "$GPURUN" sync 2>se && test_grep "box1 (1 of 3)" se && test_grep "box3 (3 of 3)" se &&
	test "$(grep -c "^synced" se)" = 3 &&
	test -f "$TRASH/box1-home/proj/train.py" && test -f "$TRASH/box3-home/proj/train.py"
'

test_expect_success 'rm with jobs on two boxes removes each on its own' '
	cd "$P" && read -r a b <ids &&
	"$GPURUN" rm "$a" "$b" >rm.out 2>&1 &&
	"$GPURUN" status --all >st && ! test_grep "$a" st && ! test_grep "$b" st &&
	test_expect_code 1 "$GPURUN" logs nosuch 2>nf ; test_grep "no job or group .nosuch. on any host of the pool" nf
'

test_expect_success 'another account holding a box: the table says whose, the line spans accounts' '
	cd "$TRASH/theirs" && t=$("$GPURUN" -q train --detach) && cd "$P" &&
	for i in $(seq 1 100); do "$GPURUN" status >st 2>/dev/null; grep -q "^box2 .* $U:$t" st && break; sleep 0.1; done &&
	test "$(grep -c "^box2 .* $U:$t\$" st)" = 4 &&
	g=$("$GPURUN" -o train.gpus=4 train --env NAME=g --detach 2>eg) && test_grep "on box2" eg &&
	wait_state "$g" queued &&
	"$GPURUN" status >st && test_grep "job $g is queued (1st in line): waiting for 4 GPUs held by job $t ($U)" st &&
	touch "$SH/go-theirs" && wait_state "$g" running && touch "$TRASH/go-g" && wait_state "$g" done
'

test_expect_success 'a pool named in the user config' '
	cd "$P" && mkdir -p "$TRASH/xdg/gpurun" &&
	printf "[pools]\nlab = box1 box2\n" >"$TRASH/xdg/gpurun/config" &&
	XDG_CONFIG_HOME=$TRASH/xdg "$GPURUN" -o remote.host=lab status --json >sj &&
	python3 -c "import json; d=json.load(open(\"sj\")); assert d[\"pool\"] == \"lab\", d; assert [h[\"host\"] for h in d[\"hosts\"]] == [\"box1\", \"box2\"], d; assert all(j[\"host\"] in (\"box1\", \"box2\") for j in d[\"jobs\"])"
'

test_expect_success 'a box that does not answer is named; the others go on' '
	# Down, as a box goes down: its sshd and the connection kept open to it.
	cd "$P" && stop_sshd box3 && "$GPURUN" --host box3 disconnect &&
	"$GPURUN" status >st 2>err && test_grep "warning: box3 did not answer" err &&
	test_grep -E "^box3 +- " st && test "$(grep -c "^box2 " st)" = 4 &&
	f=$("$GPURUN" -o train.gpus=1 train --env NAME=f --detach 2>ef) &&
	wait_state "$f" running && touch "$TRASH/go-f" && wait_state "$f" done
'

test_expect_success 'a box that takes the connection and never answers is given up on in time' '
	cd "$P" && port=$(free_port) || return 1
	python3 -c "import socket,time,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"127.0.0.1\", int(sys.argv[1]))); s.listen(8); c=s.accept(); time.sleep(120)" "$port" >/dev/null 2>&1 &
	mute=$!
	test_atexit "kill $mute 2>/dev/null"
	sleep 0.3 &&
	printf "Host mute\n\tHostName 127.0.0.1\n\tPort %s\n\n" "$port" >>"$HOME/.ssh/config" &&
	t0=$(date +%s) &&
	GPURUN_POOL_TIMEOUT_MS=2000 "$GPURUN" -o "remote.host=box1 mute" -o remote.connect_timeout=60 status >st 2>err &&
	test $(($(date +%s) - t0)) -le 6 &&
	test_grep "warning: mute did not answer: no answer within 2 s" err && test_grep -E "^box1 +0 " st
'

test_done
