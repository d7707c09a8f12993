#!/usr/bin/env python3
"""Drive a program on a pseudo-terminal, as a user at a terminal would.

    ptydrive.py [--rows R --cols C] SCRIPT -- CMD [ARGS...]

CMD runs in a new session whose controlling terminal is the pty, in the
foreground (so it may change the terminal's modes, as on a real one).
SCRIPT is steps separated by "|":

    wait:TEXT       until TEXT has appeared in the output (30 s, else fail)
    waitnew:TEXT    until TEXT appears again after this point
    send:TEXT       type TEXT (\\x03 is Ctrl-C, \\r Enter; Python escapes)
    resize:RxC      set the window size (the kernel sends SIGWINCH)
    sleep:SECONDS

When CMD has exited, prints everything the terminal showed, then
"ptydrive: modes restored" or "ptydrive: modes changed (...)" (the
terminal's modes against those before CMD ran) and "ptydrive: stray N
[bytes]" (what was typed and never read: it would reach the shell next),
and exits with CMD's status (128+N for a signal).
"""
import fcntl, os, select, signal, struct, sys, termios, time


def main():
    args = sys.argv[1:]
    rows, cols = 24, 80
    while args and args[0].startswith("--"):
        if args[0] == "--rows":
            rows = int(args[1])
        elif args[0] == "--cols":
            cols = int(args[1])
        else:
            break
        args = args[2:]
    script, argv = args[0], args[args.index("--") + 1:]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    before = termios.tcgetattr(slave)
    pid = os.fork()
    if pid == 0:
        os.close(master)
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        if slave > 2:
            os.close(slave)
        os.execvp(argv[0], argv)
    out = bytearray()
    mark = [0]
    status = [None]

    def pump(timeout):
        r, _, _ = select.select([master], [], [], timeout)
        if r:
            try:
                d = os.read(master, 65536)
            except OSError:
                d = b""
            out.extend(d)
            return bool(d)
        return False

    def reap():
        if status[0] is None:
            p, st = os.waitpid(pid, os.WNOHANG)
            if p == pid:
                status[0] = st
        return status[0] is not None

    def wait_for(text, since):
        end = time.time() + 30
        while text not in out[since:] and time.time() < end:
            pump(0.05)
            if reap():
                while pump(0.05):
                    pass
                break
        return text in out[since:]

    for step in script.split("|") if script else []:
        kind, _, arg = step.partition(":")
        raw = arg.encode().decode("unicode_escape").encode("latin-1")
        if kind in ("wait", "waitnew"):
            since = mark[0] if kind == "waitnew" else 0
            if not wait_for(raw, since):
                sys.stdout.write(out.decode(errors="replace"))
                sys.exit("ptydrive: timed out waiting for %r" % arg)
            mark[0] = out.find(raw, since) + len(raw)
        elif kind == "send":
            os.write(master, raw)
        elif kind == "resize":
            r, c = arg.split("x")
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", int(r), int(c), 0, 0))
        elif kind == "sleep":
            end = time.time() + float(arg)
            while time.time() < end:
                pump(0.05)
        else:
            sys.exit("ptydrive: unknown step %r" % step)
    end = time.time() + 60
    while not reap() and time.time() < end:
        pump(0.05)
    if status[0] is None:
        os.kill(pid, signal.SIGKILL)
        _, status[0] = os.waitpid(pid, 0)
        out.extend(b"\nptydrive: killed after 60 s\n")
    while pump(0.05):
        pass
    sys.stdout.write(out.decode(errors="replace"))
    after = termios.tcgetattr(slave)
    if after == before:
        print("\nptydrive: modes restored")
    else:
        names = ["iflag", "oflag", "cflag", "lflag", "ispeed", "ospeed", "cc"]
        diff = [n for n, a, b in zip(names, before, after) if a != b]
        print("\nptydrive: modes changed (%s)" % ", ".join(diff))
    # What was typed and never read: make the partial line readable.
    t = termios.tcgetattr(slave)
    t[3] &= ~(termios.ICANON | termios.ECHO)
    t[6][termios.VMIN] = 0
    t[6][termios.VTIME] = 0
    termios.tcsetattr(slave, termios.TCSANOW, t)
    try:
        stray = os.read(slave, 4096)
    except OSError:
        stray = b""
    print("ptydrive: stray %d %r" % (len(stray), stray))
    sys.exit(os.waitstatus_to_exitcode(status[0]) if os.WIFEXITED(status[0])
             else 128 + os.WTERMSIG(status[0]))


main()
