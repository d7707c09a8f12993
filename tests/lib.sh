# Shared by the end-to-end tests (tests/t/tNNNN-*.sh), after git's t/test-lib.sh.
#
#   . "$(dirname "$0")/../lib.sh"
#   test_expect_success 'what it checks' '
#       commands...
#   '
#   test_done
#
# Each test file gets a scratch folder ($TRASH) with its own $HOME; it is
# removed when every case passes and kept (its path printed) when one fails.
# Cases print "ok - ...", "not ok - ..." or "skip - ... (skipped: why)";
# tests/run.sh counts them.

set -u
TEST_NAME=$(basename "$0" .sh)
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${GPURUN_BUILD:-$TOP/build-san}
GPURUN=$BUILD/gpurun
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=99}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=98}
TRASH=$(mktemp -d "${TMPDIR:-/tmp}/gpurun-$TEST_NAME.XXXXXX")
export HOME=$TRASH/home
mkdir -p "$HOME/.ssh"
chmod 700 "$HOME/.ssh"
unset GPURUN_REMOTE_HOST GPURUN_REMOTE_PATH GPURUN_REMOTE_TRANSPORT SSH_AUTH_SOCK
# GPU locks are shared by every account on a host (/tmp by default): each
# test file gets its own lock folder, as root makes one (sticky, 1777), so
# tests running at once do not see each other's fake GPUs taken.
export GPURUN_LOCK_DIR=$TRASH/gpu-locks
mkdir -p "$GPURUN_LOCK_DIR" && chmod 1777 "$GPURUN_LOCK_DIR"
export NO_COLOR=1
# Connection holders ([remote] persist) live in this test file's own
# runtime folder, write their stderr (sanitizer reports) to hold.log, and
# are ended by pid when the file ends, whatever happened.
export XDG_RUNTIME_DIR=$TRASH/run
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export GPURUN_HOLD_LOG=$TRASH/hold.log
test_count=0
test_failures=0
test_cleanup_cmds=""

say() { printf '%s\n' "$*" >&2; }

# Run at exit (stop daemons) whatever happened.
test_atexit() { test_cleanup_cmds="$1; $test_cleanup_cmds"; }
# stop_holders: end this file's connection holders (by their pid files).
stop_holders() {
	for _f in "$XDG_RUNTIME_DIR"/gpurun/*.pid; do
		[ -f "$_f" ] && kill "$(cat "$_f")" 2>/dev/null
	done
	return 0
}
trap 'eval "$test_cleanup_cmds"; stop_holders' EXIT

# A case's body runs in a function of its own, so a `return 1` in it (as in
# `for f in ...; do cmp ... || return 1; done`) fails the case. Evaluated in
# test_expect_success itself, it returned from there: the case printed
# neither ok nor not ok, and a failure went uncounted.
_case_body() { eval "$1"; }

test_expect_success() {
	test_count=$((test_count + 1))
	_desc=$1
	_out=$TRASH/case-$test_count.log
	# In this shell, as git does, so a case can set variables for the next.
	_here=$PWD
	cd "$TRASH" || exit 1
	{ _case_body "$2"; } >"$_out" 2>&1
	_rc=$?
	cd "$_here" || exit 1
	if [ "$_rc" -eq 0 ]; then
		echo "ok - $TEST_NAME: $_desc"
	else
		echo "not ok - $TEST_NAME: $_desc"
		sed 's/^/#   /' "$_out" | tail -n 40
		test_failures=$((test_failures + 1))
	fi
}

test_skip() {
	test_count=$((test_count + 1))
	echo "skip - $TEST_NAME: $1 (skipped: $2)"
}

test_done() {
	eval "$test_cleanup_cmds"
	test_cleanup_cmds=""
	# The connection holders this file started end now; what their
	# sanitizers found (in hold.log) fails the file.
	_hp=$(cat "$XDG_RUNTIME_DIR"/gpurun/*.pid 2>/dev/null)
	stop_holders
	for _p in $_hp; do
		for _i in $(seq 1 100); do kill -0 "$_p" 2>/dev/null || break; sleep 0.02; done
	done
	if [ -s "$GPURUN_HOLD_LOG" ] &&
		grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$GPURUN_HOLD_LOG"; then
		test_count=$((test_count + 1))
		test_failures=$((test_failures + 1))
		echo "not ok - $TEST_NAME: a connection holder's sanitizer report (hold.log)"
		sed 's/^/#   /' "$GPURUN_HOLD_LOG" | head -40
	fi
	if [ "$test_failures" -eq 0 ]; then
		rm -rf "$TRASH"
		exit 0
	fi
	say "# scratch folder kept: $TRASH"
	exit 1
}

# Assertions, each saying what it saw.
test_cmp() { diff -u "$1" "$2"; }
test_grep() { grep "$@" || { say "grep $* failed; input was:"; cat "${@: -1}" >&2 2>/dev/null; return 1; }; }
test_expect_code() {
	_want=$1; shift
	"$@"; _got=$?
	[ "$_got" = "$_want" ] || { say "expected exit $_want, got $_got from: $*"; return 1; }
}

# A free TCP port on loopback.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# A client key for the test's user ($HOME/.ssh/id_ed25519).
make_client_key() {
	[ -f "$HOME/.ssh/id_ed25519" ] ||
		ssh-keygen -q -t ed25519 -N '' -C gpurun-test -f "$HOME/.ssh/id_ed25519"
}

# start_sshd NAME: a real OpenSSH server on loopback with a host key made
# here, accepting $HOME/.ssh/id_ed25519. Sessions get HOME=$TRASH/NAME-home
# (the "remote" home). Sets SSHD_PORT_<NAME>, and adds "Host NAME" to
# $HOME/.ssh/config (not yet in known_hosts: see trust_sshd). Paths in it
# are absolute: OpenSSH's client expands ~ from passwd, not $HOME.
# EXTRA (optional, 2nd argument): sshd_config lines put first, so they win
# (sshd keeps the first value; one SetEnv line must then set HOME too).
start_sshd() {
	_n=${1:-gpuhost}
	_extra=${2:-}
	_d=$TRASH/sshd-$_n
	mkdir -p "$_d" "$TRASH/$_n-home" /run/sshd
	make_client_key
	ssh-keygen -q -t ed25519 -N '' -f "$_d/hostkey"
	cat "$HOME/.ssh/id_ed25519.pub" >> "$_d/authorized_keys"
	for _try in 1 2 3 4 5; do
		_port=$(free_port)
		cat > "$_d/sshd_config" <<CFG
$_extra
Port $_port
ListenAddress 127.0.0.1
HostKey $_d/hostkey
AuthorizedKeysFile $_d/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PidFile $_d/sshd.pid
SetEnv HOME=$TRASH/$_n-home
AllowTcpForwarding yes
LogLevel ERROR
CFG
		rm -f "$_d/sshd.pid"
		/usr/sbin/sshd -f "$_d/sshd_config" -E "$_d/sshd.log" || continue
		for _i in $(seq 1 50); do
			[ -s "$_d/sshd.pid" ] && break
			sleep 0.05
		done
		[ -s "$_d/sshd.pid" ] || continue
		eval "SSHD_PORT_$_n=$_port"
		test_atexit "kill \$(cat '$_d/sshd.pid' 2>/dev/null) 2>/dev/null"
		cat >> "$HOME/.ssh/config" <<CFG
Host $_n
	HostName 127.0.0.1
	Port $_port
	User $(id -un)
	IdentityFile $HOME/.ssh/id_ed25519
	UserKnownHostsFile $HOME/.ssh/known_hosts

CFG
		return 0
	done
	say "could not start sshd; see $_d/sshd.log"
	return 1
}

stop_sshd() {
	kill "$(cat "$TRASH/sshd-${1:-gpuhost}/sshd.pid")" 2>/dev/null
}

# Record NAME's host key in $HOME/.ssh/known_hosts.
trust_sshd() {
	_n=${1:-gpuhost}
	eval "_port=\$SSHD_PORT_$_n"
	printf '[127.0.0.1]:%s %s\n' "$_port" "$(cut -d' ' -f1,2 "$TRASH/sshd-$_n/hostkey.pub")" \
		>> "$HOME/.ssh/known_hosts"
}

# write_ini DIR HOST TRANSPORT [REMOTE_PATH]: a minimal gpurun.ini.
write_ini() {
	mkdir -p "$1"
	cat > "$1/gpurun.ini" <<INI
[remote]
host = $2
transport = $3
path = ${4:-project}
INI
}

# start_proxy NAME TARGET_PORT [ONE_WAY_DELAY_MS] [RATE_BYTES_PER_S]: the
# delay proxy (tests/helpers/delayproxy.c) in front of 127.0.0.1:TARGET_PORT.
# Sets PROXY_PORT_<NAME>; byte counts in $TRASH/proxy-NAME.stats
# ("up N", "down N", "conns N"). proxy_cut NAME drops every connection;
# proxy_down NAME / proxy_up NAME refuse, then accept, new ones.
start_proxy() {
	_pn=$1
	rm -f "$TRASH/proxy-$_pn.port"
	"$BUILD/tests/delayproxy" --to "127.0.0.1:$2" --delay "${3:-0}" --rate "${4:-0}" \
		--port-file "$TRASH/proxy-$_pn.port" --stats "$TRASH/proxy-$_pn.stats" \
		2>"$TRASH/proxy-$_pn.log" &
	eval "PROXY_PID_$_pn=$!"
	test_atexit "kill $! 2>/dev/null"
	for _i in $(seq 1 100); do
		[ -s "$TRASH/proxy-$_pn.port" ] && break
		sleep 0.02
	done
	[ -s "$TRASH/proxy-$_pn.port" ] || { say "delay proxy did not start"; return 1; }
	eval "PROXY_PORT_$_pn=$(cat "$TRASH/proxy-$_pn.port")"
}
_proxy_pid() { eval "echo \$PROXY_PID_$1"; }
proxy_cut() { kill -USR1 "$(_proxy_pid "$1")"; sleep 0.05; }
proxy_down() { _s=$TRASH/proxy-$1.down; [ -f "$_s" ] || { touch "$_s"; kill -USR2 "$(_proxy_pid "$1")"; sleep 0.05; }; }
proxy_up() { _s=$TRASH/proxy-$1.down; [ -f "$_s" ] && { rm -f "$_s"; kill -USR2 "$(_proxy_pid "$1")"; sleep 0.05; }; return 0; }
# proxy_bytes NAME: total bytes both ways so far.
# The proxy counts a connection's last bytes as it tears it down, which a
# loaded machine may do after the client has exited: wait for the count
# to hold still for 0.3 s (at most 10 s).
proxy_bytes_now() { awk '$1=="up"||$1=="down"{s+=$2} END{print s+0}' "$TRASH/proxy-$1.stats"; }
proxy_bytes() {
	_pb=$(proxy_bytes_now "$1") _pn=0
	while [ $_pn -lt 33 ]; do
		sleep 0.3
		_pc=$(proxy_bytes_now "$1")
		[ "$_pc" = "$_pb" ] && break
		_pb=$_pc _pn=$((_pn + 1))
	done
	echo "$_pb"
}

# agent_wrap HOST_HOME CMD...: each agent binary cached in HOST_HOME then
# runs as `CMD... AGENT ARGS` (a tool that measures or traces it, such as
# /usr/bin/time or strace); the binary itself becomes AGENT.real. One
# already wrapped is left as it is.
agent_wrap() {
	_ah=$1
	shift
	# The wrapper is not the file gpurun uploads: run it all the same.
	export GPURUN_AGENT_UNCHECKED=1
	for _a in "$_ah"/.cache/gpurun/agent-*; do
		case $_a in *.real | *.tmp.*) continue ;; esac
		[ -f "$_a.real" ] && continue
		mv "$_a" "$_a.real" &&
		{ printf '#!/bin/sh\nexec'; printf ' %q' "$@" "$_a.real"; printf ' "$@"\n'; } >"$_a" &&
		chmod 755 "$_a" || return 1
	done
}

# ssh_host_via NAME SSHD_NAME PORT: a Host entry NAME reaching SSHD_NAME's
# server through PORT (e.g. a proxy's), with its host key trusted there too.
ssh_host_via() {
	cat >> "$HOME/.ssh/config" <<CFG
Host $1
	HostName 127.0.0.1
	Port $3
	User $(id -un)
	IdentityFile $HOME/.ssh/id_ed25519
	UserKnownHostsFile $HOME/.ssh/known_hosts

CFG
	printf '[127.0.0.1]:%s %s\n' "$3" "$(cut -d' ' -f1,2 "$TRASH/sshd-$2/hostkey.pub")" \
		>> "$HOME/.ssh/known_hosts"
}

# tree_sig DIR [NAME...]: one line per entry under DIR (type, file mode,
# mtime and sha256, symlink target; names repr()-quoted, so any byte goes),
# sorted, leaving out the top-level NAMEs and .gpurun/. Two trees hold the
# same files exactly when their tree_sig outputs are equal. File modes are
# masked with TREE_SIG_MASK (default 0700: the owner's bits, all the host
# keeps unless [sync] preserve_perms = true).
tree_sig() {
	TREE_SIG_MASK=${TREE_SIG_MASK:-0700} python3 - "$@" <<'PY'
import hashlib, os, stat, sys
mask = int(os.environ['TREE_SIG_MASK'], 8)
root = os.fsencode(sys.argv[1])
skip = {os.fsencode(n) for n in sys.argv[2:]} | {b'.gpurun'}
out = []
for dp, dns, fns in os.walk(root):
    rel = os.path.relpath(dp, root)
    rel = b'' if rel == b'.' else rel
    if not rel:
        dns[:] = [d for d in dns if d not in skip]
    for n in dns + fns:
        if not rel and n in skip:
            continue
        p, r = os.path.join(dp, n), os.path.join(rel, n) if rel else n
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            out.append((r, 'L ' + repr(os.readlink(p))))
        elif stat.S_ISDIR(st.st_mode):
            out.append((r, 'D'))
        else:
            h = hashlib.sha256()
            with open(p, 'rb') as f:
                for b in iter(lambda: f.read(1 << 20), b''):
                    h.update(b)
            out.append((r, 'F %o %d %s' % (st.st_mode & mask, st.st_mtime_ns, h.hexdigest())))
for r, d in sorted(out):
    print(repr(r), d)
PY
}

# make_user VAR TAG: add a real local account (name unique to this run,
# "gr<TAG><pid>") for tests of a host shared by several users; its name
# goes into VAR. It is removed at exit with its home, after its processes
# (the test's own: sshd sessions, agents, jobs) are ended by pid. Needs
# root. The password is '*': not locked, so sshd (UsePAM no) lets the
# key in, and no password logs in.
make_user() {
	_u="gr$2$$"
	useradd -m -s /bin/sh "$_u" >/dev/null || return 1
	usermod -p '*' "$_u" || return 1
	test_atexit "_end_user $_u"
	eval "$1=\$_u"
}
_end_user() {
	for _try in 1 2 3; do
		_pids=$(pgrep -u "$1") || break
		kill -9 $_pids 2>/dev/null
		sleep 0.2
	done
	userdel -r "$1" >/dev/null 2>&1
}

# start_sshd_users NAME EXTRA USER...: like start_sshd, but sessions are
# the real accounts USER... with their own homes (from passwd), keys in
# each ~/.ssh/authorized_keys and StrictModes on; adds "Host NAME-USER"
# for each to $HOME/.ssh/config. EXTRA: sshd_config lines put first (one
# SetEnv line for the environment sessions need). Trust it with
# trust_sshd NAME.
start_sshd_users() {
	_n=$1 _extra=$2
	shift 2
	_d=$TRASH/sshd-$_n
	mkdir -p "$_d" /run/sshd
	make_client_key
	ssh-keygen -q -t ed25519 -N '' -f "$_d/hostkey"
	for _u in "$@"; do
		_h=$(getent passwd "$_u" | cut -d: -f6)
		mkdir -p "$_h/.ssh" && cp "$HOME/.ssh/id_ed25519.pub" "$_h/.ssh/authorized_keys" &&
			chown -R "$_u:" "$_h/.ssh" && chmod 700 "$_h/.ssh" && chmod 600 "$_h/.ssh/authorized_keys" ||
			return 1
	done
	for _try in 1 2 3 4 5; do
		_port=$(free_port)
		cat > "$_d/sshd_config" <<CFG
$_extra
Port $_port
ListenAddress 127.0.0.1
HostKey $_d/hostkey
StrictModes yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
PidFile $_d/sshd.pid
LogLevel ERROR
CFG
		rm -f "$_d/sshd.pid"
		/usr/sbin/sshd -f "$_d/sshd_config" -E "$_d/sshd.log" || continue
		for _i in $(seq 1 50); do
			[ -s "$_d/sshd.pid" ] && break
			sleep 0.05
		done
		[ -s "$_d/sshd.pid" ] || continue
		eval "SSHD_PORT_$_n=$_port"
		test_atexit "kill \$(cat '$_d/sshd.pid' 2>/dev/null) 2>/dev/null"
		for _u in "$@"; do
			cat >> "$HOME/.ssh/config" <<CFG
Host $_n-$_u
	HostName 127.0.0.1
	Port $_port
	User $_u
	IdentityFile $HOME/.ssh/id_ed25519
	UserKnownHostsFile $HOME/.ssh/known_hosts

CFG
		done
		return 0
	done
	say "could not start sshd; see $_d/sshd.log"
	return 1
}
