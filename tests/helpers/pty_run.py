#!/usr/bin/env python3
"""Run a command on a real terminal and keep every byte it wrote there.

    pty_run.py OUT CMD [ARGS...]

CMD runs with stdin, stdout and stderr on a new pty (TERM=xterm); all it
writes is copied, raw, into OUT (escape sequences included, which a
screen scraper such as tmux capture-pane would interpret). Exits with
CMD's status (128+N for signal N). The tests use it to see exactly what
gpurun lets reach a user's terminal.
"""
import os
import pty
import sys


def main():
    out, argv = sys.argv[1], sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    with open(out, "wb") as f:
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not b:
                break
            f.write(b)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sys.exit(128 + os.WTERMSIG(status))
    sys.exit(os.WEXITSTATUS(status))


if __name__ == "__main__":
    main()
