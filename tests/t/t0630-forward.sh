#!/bin/bash
# gpurun forward (and -L on exec): local ports reach a small HTTP server on
# the host (python3 -m http.server, behind a real sshd on loopback) over
# libssh2 direct-tcpip channels of the agent's own session, over ssh's -L
# (transport = openssh) and as a plain relay (transport = local). A burst
# of 50 parallel requests, as a browser opening TensorBoard makes, all get
# their answer; a port nothing listens on is refused with a clear word;
# Ctrl-C stops it (exit 0).
. "$(dirname "$0")/../lib.sh"

R=$TRASH/gpuhost-home/proj
mkdir -p "$R/www"
head -c 200000 /dev/urandom >"$R/www/big.bin"
echo hello >"$R/www/index.txt"

# The "TensorBoard": an HTTP server on the host's loopback.
HTTP_PORT=$(free_port)
(cd "$R/www" && exec python3 -m http.server --bind 127.0.0.1 "$HTTP_PORT") \
	>"$TRASH/http.log" 2>&1 &
test_atexit "kill $! 2>/dev/null"
for _i in $(seq 1 100); do
	python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$HTTP_PORT),1)" 2>/dev/null && break
	sleep 0.1
done

# fetch PORT N: N parallel GETs (index.txt and big.bin alternately) through
# localhost:PORT; prints "N ok" when every answer is complete and right.
cat >"$TRASH/fetch.py" <<'PY'
import concurrent.futures, hashlib, sys, urllib.request
port, n, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
want = {name: open(root + "/" + name, "rb").read() for name in ("index.txt", "big.bin")}
def get(i):
    name = ("index.txt", "big.bin")[i % 2]
    body = urllib.request.urlopen("http://localhost:%d/%s" % (port, name), timeout=60).read()
    return body == want[name]
with concurrent.futures.ThreadPoolExecutor(n) as ex:
    ok = sum(ex.map(get, range(n)))
print(ok, "ok" if ok == n else "FAILED")
sys.exit(0 if ok == n else 1)
PY
fetch() { python3 "$TRASH/fetch.py" "$1" "$2" "$R/www"; }

# start_forward DIR SPEC...: gpurun forward in the background; waits for
# its "press Ctrl-C" line. FWD_PID is its pid.
start_forward() {
	_d=$1; shift
	rm -f "$TRASH/fwd.err"
	(cd "$_d" && exec "$GPURUN" forward "$@") 2>"$TRASH/fwd.err" &
	FWD_PID=$!
	test_atexit "kill $FWD_PID 2>/dev/null" # a failing case leaves none behind
	for _i in $(seq 1 300); do
		grep -q "press Ctrl-C" "$TRASH/fwd.err" 2>/dev/null && return 0
		kill -0 $FWD_PID 2>/dev/null || break
		sleep 0.1
	done
	say "forward did not start:"; cat "$TRASH/fwd.err" >&2
	return 1
}
# stop_forward: Ctrl-C (SIGINT), and its exit status must be 0.
stop_forward() {
	kill -INT $FWD_PID && wait $FWD_PID
}

test_expect_success 'start sshd; projects for libssh2, openssh and local' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	write_ini "$TRASH/p2" gpuhost libssh2 proj &&
	write_ini "$TRASH/po" gpuhost openssh proj &&
	write_ini "$TRASH/pl" local local "$R"
'

for kind in p2:libssh2 po:openssh pl:local; do
	dir=${kind%%:*} name=${kind#*:}
	test_expect_success "$name: 50 parallel requests through gpurun forward all answered" '
		LP=$(free_port) &&
		start_forward "$TRASH/$dir" "$LP:$HTTP_PORT" &&
		test_grep "forwarding localhost:$LP -> localhost:$HTTP_PORT on the host" "$TRASH/fwd.err" &&
		fetch "$LP" 50 >out && cat out && test_grep -x "50 ok" out &&
		fetch "$LP" 50 >out && test_grep -x "50 ok" out &&
		stop_forward && test_grep "stopped forwarding" "$TRASH/fwd.err"
	'
done

# A lost wakeup (libssh2 holding a channel's data that no poll reports)
# shows as a stall until the next keepalive: with ServerAliveInterval 300
# a stall takes minutes, so a bound of 60 s tells it from slowness (the
# download takes well under a second here). It caught one: after the first
# keepalive, libssh2_poll_channel_read said "nothing held" for every
# channel (ssh.h, ssh_channel_held).
test_expect_success 'libssh2: one 30 MB download through the forward does not stall' '
	head -c 30000000 /dev/urandom >"$R/www/huge.bin" &&
	cat >>"$HOME/.ssh/config" <<-CFG &&
	Host fwdbulk
		HostName 127.0.0.1
		Port $SSHD_PORT_gpuhost
		User $(id -un)
		IdentityFile $HOME/.ssh/id_ed25519
		UserKnownHostsFile $HOME/.ssh/known_hosts
		ServerAliveInterval 300
	CFG
	write_ini "$TRASH/pb" fwdbulk libssh2 proj &&
	LP=$(free_port) && start_forward "$TRASH/pb" "$LP:$HTTP_PORT" &&
	t0=$(date +%s) &&
	timeout 120 python3 -c "
import hashlib, sys, urllib.request
body = urllib.request.urlopen(\"http://localhost:%s/huge.bin\" % sys.argv[1], timeout=110).read()
want = open(sys.argv[2], \"rb\").read()
sys.exit(0 if body == want else 1)
" "$LP" "$R/www/huge.bin" &&
	el=$(( $(date +%s) - t0 )) && say "took $el s" && test $el -lt 60 &&
	stop_forward
'

test_expect_success 'libssh2: a host port nothing listens on is refused and said; the other port works' '
	LP=$(free_port) LP2=$(free_port) DEAD=$(free_port) &&
	start_forward "$TRASH/p2" "$LP:$DEAD" "$LP2:$HTTP_PORT" &&
	! fetch "$LP" 3 >out 2>&1 &&
	fetch "$LP2" 10 >out && test_grep -x "10 ok" out &&
	stop_forward &&
	test_grep "forward $LP: the host could not connect to localhost:$DEAD" "$TRASH/fwd.err" &&
	test $(grep -c "could not connect" "$TRASH/fwd.err") = 1
'

test_expect_success 'a local port in use is a usage error naming it' '
	python3 -c "import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)" >busy &
	bpid=$! &&
	for i in $(seq 1 50); do test -s busy && break; sleep 0.1; done &&
	BUSY=$(cat busy) &&
	(cd p2 && test_expect_code 252 "$GPURUN" forward "$BUSY:$HTTP_PORT" 2>err); rc=$?;
	kill $bpid; test $rc = 0 && cat p2/err &&
	test_grep "cannot listen on localhost port $BUSY: Address already in use" p2/err
'

test_expect_success 'localhost is 127.0.0.1 and ::1: both reach the host; ::1 held by another is refused' '
	LP=$(free_port) && start_forward "$TRASH/pl" "$LP:$HTTP_PORT" &&
	python3 -c "import socket,sys; s=socket.create_connection((\"::1\",$LP),5); s.sendall(b\"GET /index.txt HTTP/1.0\\r\\n\\r\\n\"); d=b\"\".join(iter(lambda: s.recv(65536), b\"\")); sys.exit(0 if d.endswith(b\"hello\\n\") else 1)" &&
	fetch "$LP" 2 >out && test_grep -x "2 ok" out && stop_forward || return 1
	LP6=$(free_port)
	python3 -c "import socket,time; s=socket.socket(socket.AF_INET6); s.bind((\"::1\",$LP6)); s.listen(); print(1, flush=True); time.sleep(60)" >busy6 &
	bpid=$! &&
	for i in $(seq 1 50); do test -s busy6 && break; sleep 0.1; done &&
	(cd pl && test_expect_code 252 timeout 20 "$GPURUN" forward "$LP6:$HTTP_PORT" 2>err); rc=$?;
	kill $bpid; test $rc = 0 && cat pl/err &&
	test_grep "cannot listen on localhost port $LP6: Address already in use" pl/err
'

test_expect_success 'bad specs are usage errors' '
	cd p2 && test_expect_code 252 "$GPURUN" forward 2>err && test_grep "forward needs a port" err &&
	test_expect_code 252 "$GPURUN" forward 70000 2>err && test_grep "bad forward .70000." err &&
	test_expect_code 252 "$GPURUN" forward a:b:c:d:e 2>err
'

for kind in p2:libssh2 po:openssh pl:local; do
	dir=${kind%%:*} name=${kind#*:}
	test_expect_success "$name: exec -L forwards while the command runs" '
		LP=$(free_port) &&
		(cd "$dir" && "$GPURUN" exec -L "$LP:$HTTP_PORT" -- python3 "$TRASH/fetch.py" "$LP" 20 "$R/www") >out &&
		test_grep -x "20 ok" out
	'
done

for kind in p2:libssh2 po:openssh; do
	dir=${kind%%:*} name=${kind#*:}
	test_expect_success "$name: train -L forwards while attached to the job" '
		LP=$(free_port) &&
		printf "[build]\ncommand =\n[train]\ncommand = python3 $TRASH/fetch.py $LP 20 $R/www\n" >>"$dir/gpurun.ini" &&
		(cd "$dir" && "$GPURUN" train -L "$LP:$HTTP_PORT") >out 2>err && cat out err &&
		test_grep -x "20 ok" out
	'
done

test_expect_success 'libssh2: a job flooding its log does not starve the forwarded port' '
	LP=$(free_port) &&
	printf "[train]\ncommand = (while ! test -e $TRASH/flood.done; do yes spam-spam-spam | head -n 100000; done) & python3 $TRASH/fetch.py $LP 20 $R/www >$TRASH/flood.res; touch $TRASH/flood.done; wait\n" >"$TRASH/flood.ini" &&
	sed "/^\[train\]/,\$d" p2/gpurun.ini >p2/flood.ini && cat "$TRASH/flood.ini" >>p2/flood.ini &&
	(cd p2 && timeout 300 "$GPURUN" -c flood.ini train -L "$LP:$HTTP_PORT") >flood.out 2>err &&
	test_grep -x "20 ok" "$TRASH/flood.res" && test $(grep -c -v -x spam-spam-spam flood.out) = 0
'

test_expect_success 'libssh2: forward makes the connection again after a drop, and goes on' '
	start_proxy wan "$SSHD_PORT_gpuhost" 2 && ssh_host_via viaproxy gpuhost "$PROXY_PORT_wan" &&
	write_ini "$TRASH/pw" viaproxy libssh2 proj &&
	LP=$(free_port) && start_forward "$TRASH/pw" "$LP:$HTTP_PORT" &&
	fetch "$LP" 10 >out && test_grep -x "10 ok" out &&
	proxy_cut wan &&
	for i in $(seq 1 300); do grep -q reconnected "$TRASH/fwd.err" && break; sleep 0.1; done &&
	test_grep "connection lost" "$TRASH/fwd.err" && test_grep reconnected "$TRASH/fwd.err" &&
	fetch "$LP" 10 >out && test_grep -x "10 ok" out &&
	stop_forward
'

test_done
