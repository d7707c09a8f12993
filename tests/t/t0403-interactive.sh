#!/bin/bash
# Ctrl-C while attached, on a terminal (a pty the test drives): train asks
# "stop the job or detach?"; d detaches (exit 0, the job keeps running), s
# stops it (exit 249), a second Ctrl-C leaves at once (exit 249).
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj R=$TRASH/rproj
mkdir -p "$P" "$R"
write_ini "$P" local local "$R"
printf '[build]\ncommand =\n[train]\ncommand = echo up; sleep 600\nstop_grace = 1\n' >>"$P/gpurun.ini"
stop_all() {
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

# term SCRIPT CMD...: run CMD on a pty; SCRIPT is "wait:TEXT" and
# "send:TEXT" steps (\x03 is Ctrl-C); prints what the terminal showed and
# exits with CMD's status.
cat >"$TRASH/term.py" <<'PY'
import os, pty, select, sys, time
steps, argv = sys.argv[1].split("|"), sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
out = b""
def read(timeout):
    global out
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return False
    try:
        d = os.read(fd, 65536)
    except OSError:
        d = b""
    if not d:
        raise EOFError
    out += d
    return True
try:
    for s in steps:
        kind, arg = s.split(":", 1)
        arg = arg.encode().decode("unicode_escape").encode()
        if kind == "wait":
            end = time.time() + 30
            while arg not in out and time.time() < end:
                read(0.1)
            if arg not in out:
                sys.stdout.write(out.decode(errors="replace"))
                sys.exit("term.py: timed out waiting for %r" % arg)
        else:
            os.write(fd, arg)
    while True:
        read(30)
except EOFError:
    pass
sys.stdout.write(out.decode(errors="replace"))
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
PY
term() { python3 "$TRASH/term.py" "$@"; }
latest() { head -n1 "$P/.gpurun/jobs" | cut -f1; }

test_expect_success 'Ctrl-C, then d: detached, the job keeps running, the message says how to reattach' '
	cd "$P" && { term "wait:up|send:\x03|wait:stop the job or detach? [s/d]|send:d\n" "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 0 && test_grep "detached from job" out && test_grep "gpurun logs -f" out &&
	"$GPURUN" status "$(latest)" >st && test_grep running st
'

test_expect_success 'Ctrl-C, then s: the job is stopped (exit 249)' '
	cd "$P" && { term "wait:up|send:\x03|wait:[s/d]|send:s\n" "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 249 && test_grep "stopping job" out &&
	"$GPURUN" status "$(latest)" >st && test_grep stopped st
'

test_expect_success 'a second Ctrl-C leaves at once (exit 249), the job still runs' '
	cd "$P" && { term "wait:up|send:\x03|wait:[s/d]|send:\x03" "$GPURUN" train >out; rc=$?; } &&
	cat out && test $rc = 249 && test_grep "left job" out &&
	"$GPURUN" status "$(latest)" >st && test_grep running st
'

test_done
