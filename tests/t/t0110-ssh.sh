#!/bin/bash
# The libssh2 transport against real sshds on loopback: key and ssh-agent
# auth, host keys (unknown, changed, accept-new, hashed, odd known_hosts
# lines), ProxyJump and ProxyCommand, agent upload, exit status and
# streams, timeouts, encrypted and unreadable keys, foreign architecture.
. "$(dirname "$0")/../lib.sh"
# Each case here is about making the connection itself (host keys, keys,
# prompts, timeouts), so each command makes its own: no holder to reuse
# (t0111 tests holding it).
export GPURUN_REMOTE_PERSIST=0

# add_host ALIAS PORT [ssh_config lines...]: another alias for a test sshd.
add_host() {
	_a=$1 _p=$2
	shift 2
	{
		printf 'Host %s\n\tHostName 127.0.0.1\n\tPort %s\n\tUser %s\n' "$_a" "$_p" "$(id -un)"
		printf '\tUserKnownHostsFile %s\n' "$HOME/.ssh/known_hosts"
		for _l in "$@"; do printf '\t%s\n' "$_l"; done
		echo
	} >> "$HOME/.ssh/config"
}

# The key line of sshd NAME, as known_hosts wants it after the host name.
hostkey_of() { cut -d' ' -f1,2 "$TRASH/sshd-$1/hostkey.pub"; }
fingerprint_of() { ssh-keygen -lf "$TRASH/sshd-$1/hostkey.pub" | cut -d' ' -f2; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }

# The sshds start here, not in a case: cases run in subshells, and the
# ports they set are needed below. "riscv" pretends to be a riscv64 host
# (gpurun carries agents for x86_64 and aarch64 only).
mkdir -p "$TRASH/fakebin" "$TRASH/riscv-home" "$TRASH/gpuhost-home/rproj" "$TRASH/p"
printf '#!/bin/sh\ncase "$1" in -m) echo riscv64;; *) exec /bin/uname "$@";; esac\n' > "$TRASH/fakebin/uname"
chmod +x "$TRASH/fakebin/uname"
start_sshd gpuhost && start_sshd jump "LogLevel DEBUG1" &&
	start_sshd riscv "SetEnv PATH=$TRASH/fakebin:/usr/bin:/bin HOME=$TRASH/riscv-home" &&
	start_sshd xdgin "SetEnv HOME=$TRASH/xdgin-home XDG_CACHE_HOME=$TRASH/xdgin-home/my/cache" &&
	start_sshd xdgrel "SetEnv HOME=$TRASH/xdgrel-home XDG_CACHE_HOME=my/cache" &&
	start_sshd xdgout "SetEnv HOME=$TRASH/xdgout-home XDG_CACHE_HOME=$TRASH/outside/cache" || {
	echo "not ok - $TEST_NAME: start the test sshds"
	test_done
}
printf "[remote]\nhost = gpuhost\npath = rproj\n" > "$TRASH/p/gpurun.ini"
P=$TRASH/p
PORT=$SSHD_PORT_gpuhost

test_expect_success 'unknown host is refused with its SHA256 fingerprint and a hint' '
	cd "$P" && test_expect_code 254 "$GPURUN" exec true 2>err &&
	test_grep "host key for .\[127.0.0.1\]:$PORT. is not known" err &&
	test_grep -F "$(fingerprint_of gpuhost)" err &&
	test_grep "^hint: .*--accept-new-host-key" err &&
	! test -s "$HOME/.ssh/known_hosts"
'

test_expect_success 'accept-new records the key; the next connection is silent' '
	cd "$P" && "$GPURUN" --accept-new-host-key exec true 2>err &&
	test_grep "added .\[127.0.0.1\]:$PORT." err &&
	test_grep -x "\[127.0.0.1\]:$PORT $(hostkey_of gpuhost)" "$HOME/.ssh/known_hosts" &&
	"$GPURUN" exec echo again >out 2>err && test_grep -x again out && ! test -s err &&
	test $(wc -l < "$HOME/.ssh/known_hosts") = 1
'

test_expect_success 'key auth over libssh2: stdout and stderr stay apart' '
	cd "$P" && "$GPURUN" exec -- sh -c "echo to-out; echo to-err >&2" >out 2>err &&
	test_grep -x to-out out && test_grep -x to-err err &&
	! grep to-err out && ! grep to-out err &&
	"$GPURUN" exec pwd >out && test_grep -x "$TRASH/gpuhost-home/rproj" out
'

test_expect_success 'exit status passes through (0, 1, 137)' '
	cd "$P" &&
	test_expect_code 0 "$GPURUN" exec -- true &&
	test_expect_code 1 "$GPURUN" exec -- false &&
	test_expect_code 137 "$GPURUN" exec -- sh -c "kill -9 \$\$"
'

test_expect_success 'stdin is forwarded and a large output arrives whole' '
	cd "$P" && seq 1 200000 > big && "$GPURUN" exec -- cat < big > back &&
	cmp big back
'

# A lost wakeup (libssh2 holding data or window that no poll reports)
# shows as a stall until the next keepalive: with ServerAliveInterval 300
# a stall would take minutes, so a bound of 60 s tells it from slowness.
test_expect_success 'bulk both ways does not stall (direct and through a jump)' '
	head -c 30000000 /dev/urandom > bulk &&
	add_host bulk $PORT "ServerAliveInterval 300" &&
	add_host bulkjump $PORT "ServerAliveInterval 300" "ProxyJump jump" &&
	printf "[127.0.0.1]:%s %s\n" $SSHD_PORT_jump "$(hostkey_of jump)" >> "$HOME/.ssh/known_hosts" &&
	cd "$P" && t0=$(ms) &&
	"$GPURUN" --host bulk exec -- cat < "$TRASH/bulk" > "$TRASH/bulk.back" && cmp "$TRASH/bulk" "$TRASH/bulk.back" &&
	"$GPURUN" --host bulkjump exec -- cat < "$TRASH/bulk" > "$TRASH/bulk.back" && cmp "$TRASH/bulk" "$TRASH/bulk.back" &&
	el=$(( $(ms) - t0 )) && say "took $el ms" && test $el -lt 60000
'

test_expect_success 'the agent is uploaded once, then reused' '
	rm -rf "$TRASH/gpuhost-home/.cache" && cd "$P" &&
	"$GPURUN" -v exec true 2>err1 && test_grep "uploading agent" err1 &&
	"$GPURUN" -v exec true 2>err2 && ! grep "uploading agent" err2 &&
	test $(ls "$TRASH/gpuhost-home/.cache/gpurun" | wc -l) = 1
'

test_expect_success 'an agent file whose content is not what gpurun uploads is sent again, never run' '
	cd "$P" && a=$(ls "$TRASH/gpuhost-home/.cache/gpurun/"agent-*) && test -x "$a" &&
	printf "#!/bin/sh\necho planted >\"$TRASH/planted\"\n" >"$a" && chmod 755 "$a" &&
	"$GPURUN" -v exec true 2>err3 && test_grep "uploading agent" err3 && ! test -e "$TRASH/planted" &&
	printf "\1" | dd of="$a" bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	"$GPURUN" -v exec true 2>err4 && test_grep "uploading agent" err4 &&
	"$GPURUN" -v exec true 2>err5 && ! grep "uploading agent" err5
'

test_expect_success 'two first connections at once both work and leave one intact agent' '
	rm -rf "$TRASH/gpuhost-home/.cache" && cd "$P" &&
	{ "$GPURUN" exec echo one >o1 2>e1 & p1=$!; } &&
	{ "$GPURUN" exec echo two >o2 2>e2 & p2=$!; } &&
	wait $p1 && wait $p2 &&
	test_grep -x one o1 && test_grep -x two o2 &&
	ls "$TRASH/gpuhost-home/.cache/gpurun" >list && test $(wc -l <list) = 1 &&
	! grep tmp list &&
	cmp "$TRASH/gpuhost-home/.cache/gpurun/$(cat list)" "$BUILD/gpurun-agent" &&
	"$GPURUN" exec echo three >o3 && test_grep -x three o3
'

test_expect_success 'a changed host key is refused, naming the old key file:line' '
	cp "$HOME/.ssh/known_hosts" good_known_hosts &&
	ssh-keygen -q -t ed25519 -N "" -f other &&
	printf "[127.0.0.1]:%s %s\n" $PORT "$(cut -d" " -f1,2 other.pub)" > "$HOME/.ssh/known_hosts" &&
	cd "$P" && test_expect_code 254 "$GPURUN" exec true 2>err &&
	test_grep "host key for .\[127.0.0.1\]:$PORT. has changed" err &&
	test_grep -F "$(fingerprint_of gpuhost)" err &&
	test_grep -F "$HOME/.ssh/known_hosts:1" err && test_grep "^hint: .*ssh-keygen -R" err
'

test_expect_success 'a changed host key is refused even with accept-new (flag or ssh_config)' '
	cd "$P" && test_expect_code 254 "$GPURUN" --accept-new-host-key exec true 2>err &&
	test_grep "has changed" err &&
	add_host chk-an $PORT "StrictHostKeyChecking accept-new" &&
	test_expect_code 254 "$GPURUN" --host chk-an exec true 2>err &&
	test_grep "has changed" err &&
	add_host chk-no $PORT "StrictHostKeyChecking no" &&
	test_expect_code 254 "$GPURUN" --host chk-no exec true 2>err &&
	test_grep "has changed" err &&
	test $(wc -l < "$HOME/.ssh/known_hosts") = 1
'

test_expect_success 'a key of another type for the host counts as changed' '
	ssh-keygen -q -t ecdsa -N "" -f other-ecdsa &&
	printf "[127.0.0.1]:%s %s\n" $PORT "$(cut -d" " -f1,2 other-ecdsa.pub)" > "$HOME/.ssh/known_hosts" &&
	cd "$P" && test_expect_code 254 "$GPURUN" --accept-new-host-key exec true 2>err &&
	test_grep "has changed.*ECDSA" err
'

test_expect_success 'known_hosts: lines libssh2 cannot parse are skipped, hashed names match' '
	{
		echo "# a comment"
		echo "@cert-authority *.example.com $(cut -d" " -f1,2 other.pub)"
		echo "[127.0.0.1]:$PORT ssh-xmss@openssh.com AAAAFHNzaC14bXNzQG9wZW5zc2guY29tAAAAFVhNU1NfU0hBMi0yNTZfVzE2X0gxMA=="
		echo "garbage"
		echo "otherhost,[127.0.0.1]:1 $(cut -d" " -f1,2 other.pub)"
		cat good_known_hosts
	} > kh-odd &&
	cp good_known_hosts kh-hashed && ssh-keygen -q -H -f kh-hashed && rm -f kh-hashed.old &&
	cd "$P" && "$GPURUN" -o remote.known_hosts="$TRASH/kh-odd" exec echo odd >out 2>err &&
	test_grep -x odd out &&
	test_grep "^|1|" "$TRASH/kh-hashed" &&
	"$GPURUN" -o remote.known_hosts="$TRASH/kh-hashed" exec echo hashed >out &&
	test_grep -x hashed out
'

test_expect_success 'a wildcard and a negated pattern in known_hosts behave as in OpenSSH' '
	echo "127.0.0.*,[127.0.0.1]:* $(hostkey_of gpuhost)" > kh-wild &&
	cd "$P" && "$GPURUN" -o remote.known_hosts="$TRASH/kh-wild" exec true &&
	echo "[127.0.0.1]:*,![127.0.0.1]:$PORT $(hostkey_of gpuhost)" > "$TRASH/kh-neg" &&
	test_expect_code 254 "$GPURUN" -o remote.known_hosts="$TRASH/kh-neg" exec true 2>err &&
	test_grep "is not known" err
'

test_expect_success '@revoked key is refused' '
	{ cat good_known_hosts; echo "@revoked * $(hostkey_of gpuhost)"; } > kh-revoked &&
	cd "$P" && test_expect_code 254 "$GPURUN" -o remote.known_hosts="$TRASH/kh-revoked" exec true 2>err &&
	test_grep "is revoked" err
'

test_expect_success 'StrictHostKeyChecking no: an unknown key is accepted with a warning' '
	: > "$TRASH/kh-empty" && add_host shk-no $PORT "StrictHostKeyChecking no" &&
	cd "$P" && "$GPURUN" --host shk-no -o remote.known_hosts="$TRASH/kh-empty" exec echo in >out 2>err &&
	test_grep -x in out && test_grep "warning: host key .* is not known" err &&
	! test -s "$TRASH/kh-empty" &&
	cp "$TRASH/good_known_hosts" "$HOME/.ssh/known_hosts"
'

test_expect_success 'ssh-agent auth: a key only the agent holds' '
	ssh-keygen -q -t ed25519 -N "" -C agent-only -f agentkey &&
	cat agentkey.pub >> "$TRASH/sshd-gpuhost/authorized_keys" &&
	ssh-agent -a "$TRASH/agent.sock" > agent.env &&
	echo "kill $(sed -n "s/^SSH_AGENT_PID=\([0-9]*\).*/\1/p" agent.env)" > agent.kill &&
	SSH_AUTH_SOCK="$TRASH/agent.sock" ssh-add -q agentkey && rm agentkey agentkey.pub &&
	add_host viaagent $PORT "IdentityFile $TRASH/no-such-key" &&
	cd "$P" && SSH_AUTH_SOCK="$TRASH/agent.sock" "$GPURUN" -v --host viaagent exec echo agent >out 2>err &&
	test_grep -x agent out && test_grep "auth publickey as .* with ssh-agent key .agent-only." err &&
	test_expect_code 254 "$GPURUN" --host viaagent exec true 2>err &&
	test_grep "no key to offer .*SSH_AUTH_SOCK is not set" err
'
test_atexit "sh '$TRASH/agent.kill' 2>/dev/null"

test_expect_success 'IdentitiesOnly: agent keys that are not the IdentityFile are not offered' '
	add_host agentonly $PORT "IdentityFile $TRASH/no-such-key" "IdentitiesOnly yes" &&
	cd "$P" && test_expect_code 254 env SSH_AUTH_SOCK="$TRASH/agent.sock" "$GPURUN" --host agentonly exec true 2>err &&
	test_grep "IdentitiesOnly" err
'

test_expect_success 'encrypted key without a terminal: a clear message and a hint' '
	ssh-keygen -q -t ed25519 -N "sesame" -C enc -f enckey &&
	cat enckey.pub >> "$TRASH/sshd-gpuhost/authorized_keys" &&
	add_host enc $PORT "IdentityFile $TRASH/enckey" &&
	cd "$P" && test_expect_code 254 setsid "$GPURUN" --host enc exec true </dev/null 2>err &&
	test_grep "key .$TRASH/enckey. is encrypted and no terminal is available to ask for its passphrase" err &&
	test_grep "^hint: .*ssh-add" err
'

if command -v tmux >/dev/null; then
	# Run gpurun in a tmux pane (a real terminal) and type at its prompt.
	tmux_run() {
		tmux -L "gr$$" -f /dev/null new-session -d -x 200 -y 20 \
			"cd '$P' && '$GPURUN' --host ${1:-enc} exec echo unlocked >'$TRASH/tm.out' 2>'$TRASH/tm.err'; echo \$? >'$TRASH/tm.rc'"
	}
	# tmux_type N TEXT: wait for the Nth prompt, then type TEXT and Enter.
	tmux_type() {
		for _i in $(seq 1 100); do
			test "$(tmux -L "gr$$" capture-pane -p 2>/dev/null | grep -c "passphrase for key")" -ge "$1" && break
			sleep 0.1
		done
		test "$(tmux -L "gr$$" capture-pane -p 2>/dev/null | grep -c "passphrase for key")" -ge "$1" ||
			{ say "prompt $1 never came"; return 1; }
		tmux -L "gr$$" send-keys "$2" Enter
	}
	tmux_wait() {
		for _i in $(seq 1 150); do test -s "$TRASH/tm.rc" && return 0; sleep 0.1; done
		return 1
	}
	test_atexit "tmux -L gr$$ kill-server 2>/dev/null"
	test_expect_success 'encrypted key on a terminal: the passphrase is asked for, then used' '
		rm -f tm.* && tmux_run && tmux_type 1 sesame && tmux_wait &&
		test "$(cat tm.rc)" = 0 && test_grep -x unlocked tm.out
	'
	test_expect_success 'encrypted key: a wrong passphrase three times is a clear error' '
		rm -f tm.* && tmux_run && tmux_type 1 nope1 && tmux_type 2 nope2 && tmux_type 3 nope3 && tmux_wait &&
		test "$(cat tm.rc)" = 254 && test_grep "wrong passphrase for key .$TRASH/enckey." tm.err
	'
	test_expect_success 'encrypted PEM key without its .pub: asked for up front, then used' '
		ssh-keygen -q -t ecdsa -m PEM -N "sesame" -f pemkey &&
		cat pemkey.pub >> "$TRASH/sshd-gpuhost/authorized_keys" && rm pemkey.pub &&
		add_host pem $PORT "IdentityFile $TRASH/pemkey" &&
		rm -f tm.* && tmux_run pem && tmux_type 1 sesame && tmux_wait &&
		test "$(cat tm.rc)" = 0 && test_grep -x unlocked tm.out
	'
else
	test_skip 'encrypted key on a terminal' 'tmux is not installed'
fi

test_expect_success 'an RSA key is refused, and the message says why' '
	ssh-keygen -q -t rsa -b 2048 -N "" -f rsakey &&
	cat rsakey.pub >> "$TRASH/sshd-gpuhost/authorized_keys" &&
	add_host rsa $PORT "IdentityFile $TRASH/rsakey" &&
	cd "$P" && test_expect_code 254 "$GPURUN" --host rsa exec true 2>err &&
	test_grep "rsakey: refused (libssh2 1.10 signs RSA with SHA-1" err
'

test_expect_success 'unreadable and broken keys name the file and the cause' '
	mkdir -p adir && add_host dirkey $PORT "IdentityFile $TRASH/adir" &&
	cd "$P" && test_expect_code 254 "$GPURUN" --host dirkey exec true 2>err &&
	test_grep "cannot read key .$TRASH/adir.: Is a directory" err &&
	echo "not a key" > "$TRASH/junk" &&
	test_expect_code 254 "$GPURUN" --host dirkey -o remote.identity="$TRASH/junk" exec true 2>err &&
	test_grep "$TRASH/junk. is not a private key" err &&
	test_grep "^hint: check \[remote\] identity" err
'

test_expect_success 'a missing [remote] identity is an error; ssh_config ones are skipped' '
	cd "$P" && "$GPURUN" exec true &&
	add_host missing $PORT "IdentityFile $TRASH/nope1" "IdentityFile $HOME/.ssh/id_ed25519" &&
	"$GPURUN" --host missing exec true &&
	test_expect_code 254 "$GPURUN" --host dirkey -o remote.identity="$TRASH/nope2" exec true 2>err &&
	test_grep "cannot read key .$TRASH/nope2.: No such file" err
'

test_expect_success 'ProxyJump through a second sshd (and a chain of two jumps)' '
	trust_sshd jump &&
	add_host viajump $PORT "ProxyJump jump" &&
	cd "$P" && "$GPURUN" --host viajump exec echo jumped >out &&
	test_grep -x jumped out &&
	test_grep "target 127.0.0.1 port $PORT" "$TRASH/sshd-jump/sshd.log" &&
	add_host viajump2 $PORT "ProxyJump jump,jump" &&
	"$GPURUN" --host viajump2 exec -- sh -c "seq 1 50000" >out && test $(wc -l <out) = 50000 &&
	seq 1 400000 > big2 && "$GPURUN" --host viajump2 exec -- cat < big2 > back2 && cmp big2 back2 &&
	test_grep "target 127.0.0.1 port $SSHD_PORT_jump" "$TRASH/sshd-jump/sshd.log"
'

test_expect_success 'ProxyJump: a jump host that cannot reach the target says so' '
	dead=$(free_port) && add_host deadjump $dead "ProxyJump jump" &&
	cd "$P" && test_expect_code 255 "$GPURUN" --host deadjump exec true 2>err &&
	test_grep "jump host jump could not open a tunnel to 127.0.0.1 port $dead" err
'

test_expect_success 'ProxyCommand: the session runs over the command' '
	add_host viapc $PORT "ProxyCommand ssh -F $HOME/.ssh/config -W %h:%p jump" &&
	: > "$TRASH/sshd-jump/sshd.log" &&
	cd "$P" && "$GPURUN" --host viapc exec echo proxied >out &&
	test_grep -x proxied out && test_grep "target 127.0.0.1 port $PORT" "$TRASH/sshd-jump/sshd.log" &&
	add_host badpc $PORT "ProxyCommand false" &&
	test_expect_code 255 "$GPURUN" --host badpc exec true 2>err &&
	test_grep "ProxyCommand .false. for badpc exited (status 1)" err
'

test_expect_success 'host down: a closed port is refused at once' '
	dead=$(free_port) && add_host down $dead &&
	cd "$P" && t0=$(ms) && test_expect_code 255 "$GPURUN" --host down exec true 2>err &&
	test $(( $(ms) - t0 )) -lt 2000 &&
	test_grep "cannot connect to 127.0.0.1 port $dead: Connection refused" err
'

# A listener whose accept queue is full (SYNs dropped: a black hole) and
# one that accepts and never speaks.
cat > "$TRASH/listen.py" <<'PY'
import socket, sys, time
mode = sys.argv[1]
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)
port = s.getsockname()[1]
held = []
if mode == "full":
    held.append(socket.create_connection(("127.0.0.1", port)))
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", port))
    except BlockingIOError: pass
    held.append(c)
print(port, flush=True)
while True:
    if mode == "silent":
        c, _ = s.accept(); held.append(c)
    else:
        time.sleep(60)
PY

test_expect_success 'host down: a black hole fails within ConnectTimeout' '
	python3 "$TRASH/listen.py" full > full.port & echo "kill $!" > full.kill &&
	for i in $(seq 1 50); do test -s full.port && break; sleep 0.1; done &&
	add_host blackhole $(cat full.port) "ConnectTimeout 2" &&
	cd "$P" && t0=$(ms) && test_expect_code 255 "$GPURUN" --host blackhole exec true 2>err &&
	el=$(( $(ms) - t0 )) && say "took $el ms" && test $el -ge 1900 && test $el -lt 3500 &&
	test_grep "no answer within 2 s" err && test_grep "^hint: .*ConnectTimeout" err &&
	t0=$(ms) && test_expect_code 255 "$GPURUN" --host blackhole -o remote.connect_timeout=1 exec true 2>err &&
	el=$(( $(ms) - t0 )) && test $el -ge 900 && test $el -lt 2500
'
test_atexit "sh '$TRASH/full.kill' 2>/dev/null"

test_expect_success 'a server that never speaks SSH fails within ConnectTimeout' '
	python3 "$TRASH/listen.py" silent > silent.port & echo "kill $!" > silent.kill &&
	for i in $(seq 1 50); do test -s silent.port && break; sleep 0.1; done &&
	add_host silent $(cat silent.port) "ConnectTimeout 2" &&
	cd "$P" && t0=$(ms) && test_expect_code 255 "$GPURUN" --host silent exec true 2>err &&
	el=$(( $(ms) - t0 )) && test $el -ge 1900 && test $el -lt 3500 &&
	test_grep "did not complete the SSH handshake within 2 s" err
'
test_atexit "sh '$TRASH/silent.kill' 2>/dev/null"

# The sshd processes serving gpuhost's connections (not its listener).
session_pids() {
	for _m in $(pgrep -P "$(cat "$TRASH/sshd-gpuhost/sshd.pid")"); do
		echo "$_m" $(pgrep -P "$_m" -f "sshd")
	done
}

test_expect_success 'the host going away mid-command is an error, not a hang' '
	cd "$P" && { "$GPURUN" exec sleep 30 >out 2>err & g=$!; } &&
	for i in $(seq 1 50); do test -n "$(session_pids)" && break; sleep 0.1; done &&
	sleep 0.5 && kill -9 $(session_pids) &&
	t0=$(ms) && { wait $g; rc=$?; } && test $rc = 255 &&
	test $(( $(ms) - t0 )) -lt 3000 && test_grep "connection to .* lost\|closed" err
'

test_expect_success 'a connection cut on the network ends gpurun with an error' '
	start_proxy wan $PORT 10 && ssh_host_via wanhost gpuhost "$PROXY_PORT_wan" &&
	cd "$P" && "$GPURUN" --host wanhost exec echo through >out && test_grep -x through out &&
	{ "$GPURUN" --host wanhost exec sleep 30 >out 2>err & g=$!; } &&
	sleep 1.5 && proxy_cut wan && t0=$(ms) && { wait $g; rc=$?; } &&
	test $rc = 255 && test $(( $(ms) - t0 )) -lt 3000 && test -s err
'

test_expect_success 'keepalive: a host that stops answering is detected' '
	add_host alive $PORT "ServerAliveInterval 1" "ServerAliveCountMax 2" &&
	cd "$P" && { "$GPURUN" --host alive exec sleep 30 >out 2>err & g=$!; } &&
	for i in $(seq 1 50); do test -n "$(session_pids)" && break; sleep 0.1; done &&
	sleep 1 && pids=$(session_pids) && kill -STOP $pids &&
	t0=$(ms) && { wait $g; rc=$?; } && el=$(( $(ms) - t0 )) && kill -9 $pids &&
	say "detected after $el ms" && test $rc = 255 && test $el -lt 6000 &&
	test_grep "stopped answering" err && test_grep "^hint: .*ServerAliveInterval" err
'

test_expect_success 'an unknown host name is a clear error' '
	printf "Host nosuch\n\tHostName no-such-host.invalid\n\n" >> "$HOME/.ssh/config" &&
	cd "$P" && test_expect_code 255 "$GPURUN" --host nosuch exec true 2>err &&
	test_grep "cannot resolve .no-such-host.invalid." err
'

test_expect_success 'a banner from the remote shell does not confuse the bootstrap' '
	printf "echo Welcome to the GPU box\n" > "$TRASH/gpuhost-home/.profile" &&
	printf "echo noisy bashrc\necho noisy stderr >&2\n" > "$TRASH/gpuhost-home/.bashrc" &&
	cd "$P" && "$GPURUN" exec echo fine >out && test_grep -x fine out &&
	rm "$TRASH/gpuhost-home/.profile" "$TRASH/gpuhost-home/.bashrc"
'

test_expect_success 'an unsupported remote architecture: one message naming what gpurun carries, and a hint' '
	trust_sshd riscv &&
	cd "$P" && test_expect_code 255 "$GPURUN" --host riscv exec true 2>err &&
	test_grep "the host is .Linux riscv64.; this gpurun carries agents for .Linux x86_64. and .Linux aarch64. only" err &&
	test_grep "^hint: " err && ! test -e "$TRASH/riscv-home/.cache"
'

# The first folder from / down to $1 that is another user's or that group
# or others can write and is not sticky (what the boot script refuses),
# or nothing.
first_unsafe() {
	_p= && for _c in / $(echo "${1#/}" | tr / " "); do
		_p=${_p%/}/$_c && [ "$_c" = / ] && _p=/
		[ -d "$_p" ] || break
		case $(stat -c '%u %A' "$_p") in
		"$(id -u) "?????????t | "0 "?????????t) ;;
		"$(id -u) "?????w* | "$(id -u) "????????w* | "0 "?????w* | "0 "????????w*) echo "$_p"; return ;;
		"$(id -u) "* | "0 "*) ;;
		*) echo "$_p"; return ;;
		esac
	done
}

test_expect_success 'XDG_CACHE_HOME: the agent is cached there, and every folder down to it is checked' '
	trust_sshd xdgin && cd "$P" && mkdir -p "$TRASH/xdgin-home/rproj" &&
	"$GPURUN" --host xdgin exec true &&
	test -x "$TRASH/xdgin-home/my/cache/gpurun/agent-$("$GPURUN" --version | sed -n "s/.*(agent \([0-9a-f]*\),.*/\1/p")-$(uname -m)" &&
	! test -e "$TRASH/xdgin-home/.cache" &&
	chmod g+w "$TRASH/xdgin-home/my" && test_expect_code 255 "$GPURUN" --host xdgin exec true 2>err;
	rc=$?; chmod g-w "$TRASH/xdgin-home/my" && test $rc = 0 &&
	test_grep "refusing to run the agent .*$TRASH/xdgin-home/my. can be written by another user" err &&
	"$GPURUN" --host xdgin exec true
'

test_expect_success 'XDG_CACHE_HOME: a relative one is ignored (~/.cache/gpurun)' '
	trust_sshd xdgrel && cd "$P" && mkdir -p "$TRASH/xdgrel-home/rproj" &&
	"$GPURUN" --host xdgrel exec true && ls "$TRASH/xdgrel-home/.cache/gpurun/"agent-*-$(uname -m) &&
	! test -e "$TRASH/xdgrel-home/my"
'

test_expect_success 'XDG_CACHE_HOME outside the home: the folders from / down are checked' '
	trust_sshd xdgout && cd "$P" && mkdir -p "$TRASH/xdgout-home/rproj" "$TRASH/outside" &&
	bad=$(first_unsafe "$TRASH/outside/cache") && say "first unsafe folder: ${bad:-none}" &&
	if [ -n "$bad" ]; then
		test_expect_code 255 "$GPURUN" --host xdgout exec true 2>err &&
		test_grep "refusing to run the agent .*.$bad. can be written by another user" err &&
		! test -e "$TRASH/outside/cache"
	else
		"$GPURUN" --host xdgout exec true && ls "$TRASH/outside/cache/gpurun/"agent-*
	fi
'

test_expect_success 'XDG_CACHE_HOME below a sticky folder (/tmp): allowed, as the agent allows it' '
	sticky=$(mktemp -d /tmp/gpurun-sticky.XXXXXX) && chmod 1777 "$sticky" &&
	test_atexit "rm -rf $sticky" &&
	cd "$P" && "$GPURUN" -o "remote.host=xdgin" exec true &&
	sed -i "s|^SetEnv HOME=$TRASH/xdgin-home XDG_CACHE_HOME=.*|SetEnv HOME=$TRASH/xdgin-home XDG_CACHE_HOME=$sticky/cache|" "$TRASH/sshd-xdgin/sshd_config" &&
	kill -HUP "$(cat "$TRASH/sshd-xdgin/sshd.pid")" && sleep 0.5 &&
	"$GPURUN" --host xdgin exec true && ls "$sticky/cache/gpurun/"agent-*-$(uname -m) &&
	chmod 777 "$sticky" && test_expect_code 255 "$GPURUN" --host xdgin exec true 2>err;
	rc=$?; chmod 1777 "$sticky"; test $rc = 0 &&
	test_grep "refusing to run the agent .*$sticky. can be written by another user" err
'

test_expect_success 'doctor: every check passes against the test sshd' '
	cd "$P" && "$GPURUN" doctor >out 2>err && cat out &&
	! grep "^FAIL" out &&
	missing= &&
	for c in config ssh_config resolve tcp handshake hostkey auth agent cc make path disk crypto; do
		grep -q "^ok   $c " out || missing="$missing $c"
	done &&
	test -z "$missing" &&
	test_grep "^ok   crypto .*cipher aes[0-9]*-\(ctr\|gcm\)" out
'

test_expect_success 'doctor: an unknown host fails at the host key, with the hint' '
	: > "$TRASH/kh-empty" &&
	cd "$P" && test_expect_code 254 "$GPURUN" -o remote.known_hosts="$TRASH/kh-empty" doctor >out 2>err &&
	test_grep "^ok   tcp " out && test_grep "^FAIL hostkey .*is not known" out &&
	test_grep "^     hint: .*accept-new-host-key" out && ! grep "^ok   auth" out
'

test_expect_success 'doctor: through a jump host, each hop is checked' '
	cd "$P" && "$GPURUN" --host viajump doctor >out && cat out &&
	test_grep "^ok   tcp         jump host jump: connected" out &&
	test_grep "^ok   tcp         tunnel through jump" out
'

test_expect_success 'doctor: ssh_config lines gpurun ignores are shown as warnings' '
	add_host odd $PORT "NoSuchOption yes" &&
	cd "$P" && "$GPURUN" --host odd doctor >out && cat out &&
	test_grep -i "^warn ssh_config .*unknown.*NoSuchOption" out && test_grep "^ok   auth " out
'

test_expect_success 'doctor: transport = local skips the ssh checks' '
	write_ini "$TRASH/loc" local local "$TRASH/locproj" && mkdir -p "$TRASH/locproj" &&
	cd "$TRASH/loc" && "$GPURUN" doctor >out && cat out &&
	test_grep "^skip ssh .*transport = local" out && test_grep "^ok   agent " out &&
	test_grep "^ok   path .*locproj exists" out && ! grep "^ok   tcp" out
'

test_expect_success 'doctor: without gpurun.ini it says how to make one' '
	mkdir -p "$TRASH/empty" && cd "$TRASH/empty" &&
	test_expect_code 253 "$GPURUN" doctor >out && test_grep "^FAIL config " out &&
	test_grep "gpurun init" out
'

test_expect_success 'doctor: a closed port fails at tcp' '
	cd "$P" && test_expect_code 255 "$GPURUN" --host down doctor >out &&
	test_grep "^FAIL tcp .*Connection refused" out && test_grep "^     hint: " out
'

test_done
