#!/usr/bin/env python3
"""Model-based randomized test of gpurun sync (issue 10).

For each seed, a generator applies batches of operations to a project tree
(create, edit in place, append, truncate, rewrite with compressible and
incompressible data below and above [sync] delta_min, rename, chmod +x/-x,
mtime-only changes, symlinks inside and pointing out, file/folder/symlink
swaps, deletions, odd names, FIFOs), and between them tampers with the
host's copy (edits, deletions, mode changes, hard links, folders swapped for
symlinks to a folder outside, symlinks and files swapped for empty folders),
drops the client's local state (a fresh clone syncing to an existing
folder), and runs syncs that a fault interrupts: gpurun or the agent killed
with SIGKILL at a random moment, the connection cut by the delay proxy
(ssh only), the remote folder's file system full (a tmpfs), a project
folder swapped for a symlink to a folder outside while the sync reads it.

The model is what git would send: the generated trees hold no ignore files,
no .git and no folder named runs (the default [sync] exclude), so the
expected host tree is the project tree minus .gpurun/, FIFOs and the names
sync cannot carry (.gpurun-tmp-*). After every batch a clean sync must
succeed and leave the host tree equal to the project (type, content, mode,
mtime, link targets), with no temp file left, nothing written outside the
folder (a sentinel folder outside is checked), no byte from outside the
project on the host (a marker), every gpurun run ending within the limit;
a sync that a fault broke may fail, but must say why, and every file on the
host must then be its old or its new version.

On a failure: the seed, what failed, and the smallest sequence of batches
(and of the steps in them) that still fails, written to a file that
--replay runs again.

  sync_model.py --gpurun BIN --work DIR [--transport local|libssh2]
                [--host ALIAS] [--proxy-pid PID] [--tmpfs DIR]
                [--agent-dir DIR] --seeds A[-B] [--batches N] [--big-every N]
                [--no-shrink] [--replay FILE]
Prints one line per seed, then "N seeds, N batches, N operations, N faults,
N syncs (N on the host's changes): N failed".
"""
import argparse
import ast
import errno
import hashlib
import os
import random
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time

TIMEOUT = int(os.environ.get("MODEL_TIMEOUT", "300"))  # any one gpurun run
SECRET = b"GPURUN-MODEL-SECRET-7f3a"

PLAIN = [b"src", b"data", b"lib", b"a", b"b", b"model.py", b"README", b"x.bin",
         b"ckpt", b"notes.txt", b"util", b"deep", b"train.bin", b"cfg.yaml"]
ODD = [b"a b", b"new\nline", b"\xff\xfe", "caf\u00e9".encode(), b"-dash", b"...dots",
       b'q"uote', b"back\\slash", b"star*?[x]", b" lead", b"trail ", b"#hash", b"!bang",
       b"tab\tname", "\u65e5\u672c".encode(), b"%s%n", b"n" * 200]
# sync cannot carry these (the agent's own temp files): never sent, never expected
UNSENDABLE = re.compile(rb"^\.gpurun-tmp-")


def rel(p):
    return p.decode("utf-8", "backslashreplace")


# ---------------------------------------------------------------- trees


def walk(root):
    """{relpath: (kind, ...)} of everything under root (bytes paths)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        r = os.path.relpath(dp, root)
        r = b"" if r == b"." else r
        for n in dns + fns:
            p = os.path.join(dp, n)
            rp = os.path.join(r, n) if r else n
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[rp] = ("L", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rp] = ("D",)
            elif stat.S_ISREG(st.st_mode):
                out[rp] = ("F", st.st_mode & 0o777, st.st_mtime_ns, st.st_size)
            else:
                out[rp] = ("O",)
        dns[:] = [d for d in dns if not os.path.islink(os.path.join(dp, d))]
    return out


def file_hash(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def signature(root, local, content=True):
    """What sync must make equal: type, mode, mtime, content, link target."""
    sig = {}
    for rp, e in walk(root).items():
        parts = rp.split(b"/")
        if parts[0] == b".gpurun":
            continue
        if local and (e[0] == "O" or any(UNSENDABLE.match(x) for x in parts)):
            continue
        if e[0] == "F":
            try:
                h = file_hash(os.path.join(root, rp))
            except FileNotFoundError:  # an agent still cleaning up after a fault
                continue
            # The host keeps the owner's bits only ([sync] preserve_perms
            # is off): 0644 here is 0600 there.
            sig[rp] = ("F", e[1] & 0o700, e[2], h) if content else ("F", h)
        else:
            sig[rp] = e
    return sig


def diff(a, b, limit=8):
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            out.append("  %s: here %s, host %s" % (rel(k), a.get(k, "-"), b.get(k, "-")))
    return "\n".join(out[:limit] + (["  ... %d more" % (len(out) - limit)] if len(out) > limit else []))


# ---------------------------------------------------------------- content


def content(kind, size, seed):
    r = random.Random(seed)
    if kind == "zero":
        return bytes(size)
    if kind == "ones":
        return b"\1" * size
    if kind == "text":
        line = b"".join(r.choice([b"loss ", b"grad ", b"step ", b"lr ", b"%d " % r.randint(0, 999)])
                        for _ in range(12)) + b"\n"
        return (line * (size // len(line) + 1))[:size]
    b = bytearray(r.randbytes(size))
    if kind == "f32":  # float32-like: every fourth byte (the exponent) from a few values
        n = len(b[3::4])
        pat = bytes(r.choice(b"\x3e\x3f\xbe\xbf") for _ in range(64))
        b[3::4] = (pat * (n // 64 + 1))[:n]
    return bytes(b)


def pick_size(r, big_ok):
    x = r.random()
    if x < 0.35:
        return r.randint(0, 300)
    if x < 0.65:
        return r.randint(300, 70000)
    if x < 0.80:
        return r.randint(70000, (1 << 20) - 1)
    if x < 0.95 or not big_ok:
        return r.choice([1 << 20, (1 << 20) + 1, r.randint(1 << 20, 6 << 20), 3 << 20])
    return r.randint(6 << 20, 40 << 20)


def pick_kind(r):
    return r.choice(["rand", "rand", "text", "text", "zero", "ones", "f32"])


# ---------------------------------------------------------------- operations

LOCAL_OPS = [("create", 20), ("mkdir", 6), ("edit", 12), ("append", 6), ("truncate", 4),
             ("rewrite", 8), ("rename", 6), ("chmod", 5), ("touch", 4), ("symlink", 5),
             ("relink", 2), ("file2dir", 3), ("dir2file", 3), ("dir2link", 2),
             ("link2dir", 2), ("file2link", 2), ("delete", 6), ("rmdir", 3), ("fifo", 1),
             ("hardlink", 1), ("unsendable", 1)]
HOST_OPS = [("hedit", 4), ("hdelete", 3), ("hrmdir", 2), ("hchmod", 2), ("htouch", 2),
            ("hdir2link", 2), ("hlink2dir", 2), ("hfile2dir", 1), ("hhardlink", 2)]


def weighted(r, table):
    t = r.uniform(0, sum(w for _, w in table))
    for name, w in table:
        t -= w
        if t <= 0:
            return name
    return table[-1][0]


class Run:
    """One seed's project, host folder and what it did."""

    def __init__(self, a, seed, work):
        self.a = a
        self.seed = seed
        self.work = work
        self.P = os.path.join(work, b"proj")
        base = a.tmpfs.encode() if a.tmpfs else work
        self.R = os.path.join(base, b"remote-%d" % seed)
        self.outside_local = os.path.join(work, b"outside-local")
        self.outside_host = os.path.join(work, b"outside-host")
        self.aside = os.path.join(work, b"aside")
        self.delta_min = "64k" if seed % 2 else "1M"
        self.last_sync = 0.2
        self.counts = {"ops": 0, "faults": 0, "syncs": 0, "host_changed": 0}
        self.linked = []  # host files hard-linked and not changed otherwise since
        self.tampered = set()  # host paths changed since the last sync

    # -- setup

    def fresh(self):
        base = os.path.dirname(self.R)  # earlier seeds' host folders go too
        old = [os.path.join(base, n) for n in os.listdir(base) if n.startswith(b"remote-")]
        for d in [self.P, self.outside_local, self.outside_host, self.aside] + old:
            if os.path.lexists(d):
                subprocess.run(["rm", "-rf", d])
        for n in os.listdir(self.work):
            if n.startswith(b"hardlink-"):
                os.unlink(os.path.join(self.work, n))
        if self.a.tmpfs:
            ballast = os.path.join(self.a.tmpfs.encode(), b"ballast")
            if os.path.exists(ballast):
                os.unlink(ballast)
        os.makedirs(self.P)
        os.makedirs(self.outside_local)
        os.makedirs(self.outside_host)
        for d, text in ((self.outside_local, SECRET), (self.outside_host, b"host sentinel")):
            for n in (b"x", b"a", b"data", b"model.py"):
                with open(os.path.join(d, n), "wb") as f:
                    f.write(text + b"\n")
        self.sentinel = signature(self.outside_host, False)
        host = self.a.host if self.a.transport == "libssh2" else "local"
        with open(os.path.join(self.P, b"gpurun.ini"), "w") as f:
            f.write("[remote]\nhost = %s\ntransport = %s\npath = %s\n[sync]\ndelta_min = %s\n"
                    % (host, self.a.transport, self.R.decode(), self.delta_min))
        os.chmod(os.path.join(self.P, b"gpurun.ini"), 0o600)

    # -- running gpurun

    def gpurun(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.Popen([self.a.gpurun, *args], cwd=self.P, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=e, start_new_session=True)
        return p

    def finish(self, p):
        try:
            out, err = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise Failure("gpurun sync did not end within %d s" % TIMEOUT)
        self.counts["syncs"] += 1
        err = err.decode("utf-8", "backslashreplace")
        # A hard link made on the host (a job's snapshot) is no change.
        for path in self.linked:
            if re.search(r"^gpurun: %s changed on the host" % re.escape(rel(path)), err, re.M):
                raise Failure("a hard link to %s made on the host was reported as a change:\n%s"
                              % (rel(path), err.rstrip()))
        self.linked, self.tampered = [], set()
        return p.returncode, err

    def clean_sync(self, what):
        t0 = time.monotonic()
        # (traced: the seed's line says how often the sync planned on the
        # host's changes, with no list of the tree)
        rc, err = self.finish(self.gpurun("sync", "--yes", env={"GPURUN_TRACE": "1"}))
        self.counts["host_changed"] += "sync: the host changed since the state" in err
        err = "\n".join(l for l in err.split("\n") if not l.startswith("trace: "))
        self.last_sync = time.monotonic() - t0
        if rc != 0:
            raise Failure("%s: a clean sync failed (exit %d):\n%s" % (what, rc, err.rstrip()))
        self.check_converged(what)
        return err

    def noop_sync(self, what):
        """Right after a clean sync: nothing to send, and said so."""
        p = self.gpurun("sync", "--yes")
        try:
            out, err = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise Failure("%s: gpurun sync did not end within %d s" % (what, TIMEOUT))
        self.counts["syncs"] += 1
        said = (out + err).decode("utf-8", "backslashreplace")
        if p.returncode != 0 or "up to date" not in said:
            raise Failure("%s: not a no-op (exit %d):\n%s" % (what, p.returncode, said.rstrip()))
        self.check_converged(what)

    def check_converged(self, what):
        here, host = signature(self.P, True), signature(self.R, False)
        if here != host:
            raise Failure("%s: the host differs from the project:\n%s" % (what, diff(here, host)))
        self.check_invariants(what)

    def check_invariants(self, what, temps_ok=False):
        if signature(self.outside_host, False) != self.sentinel:
            raise Failure("%s: a folder outside the host's project folder changed" % what)
        for rp, e in walk(self.R).items():
            if not temps_ok and UNSENDABLE.match(os.path.basename(rp)):
                raise Failure("%s: a temp file was left on the host: %s" % (what, rel(rp)))
            try:
                leaked = e[0] == "F" and SECRET in open(os.path.join(self.R, rp), "rb").read()
            except FileNotFoundError:  # an agent still cleaning up after a fault
                continue
            if leaked:
                raise Failure("%s: a file from outside the project reached the host: %s"
                              % (what, rel(rp)))

    # -- local operations

    def files(self, root=None, kinds="F"):
        return sorted(k for k, e in walk(root or self.P).items()
                      if e[0] in kinds and k.split(b"/")[0] != b".gpurun" and k != b"gpurun.ini")

    def new_path(self, r):
        dirs = [b""] + [d for d in self.files(kinds="D") if d.count(b"/") < 4]
        parent = r.choice(dirs)
        name = r.choice(ODD if r.random() < 0.2 else PLAIN)
        if r.random() < 0.8:
            name += b"-%d" % r.randint(0, 99999)
        return os.path.join(parent, name) if parent else name

    def gen_local(self, r, big_ok):
        op = weighted(r, LOCAL_OPS)
        files, dirs = self.files(), self.files(kinds="D")
        links = self.files(kinds="L")
        d = {"op": op, "seed": r.randint(0, 1 << 30)}
        if op in ("create", "mkdir", "symlink", "fifo", "unsendable"):
            d["path"] = self.new_path(r)
        elif op in ("edit", "append", "truncate", "rewrite", "chmod", "touch", "delete",
                    "file2dir", "file2link", "hardlink") and files:
            d["path"] = r.choice(files)
        elif op in ("rmdir", "dir2file", "dir2link") and dirs:
            d["path"] = r.choice(dirs)
        elif op in ("relink", "link2dir") and links:
            d["path"] = r.choice(links)
        elif op == "rename" and (files or dirs):
            d["path"] = r.choice(files + dirs)
            d["to"] = self.new_path(r)
        else:
            return None
        if op in ("create", "rewrite", "dir2file"):
            d["size"], d["kind"] = pick_size(r, big_ok), pick_kind(r)
        if op in ("symlink", "relink", "file2link", "dir2link"):
            inside = files + dirs
            d["target"] = r.choice([b"../../outside-local", self.outside_local, b"/etc/hostname",
                                    b"dangling-%d" % r.randint(0, 99)] +
                                   ([os.path.relpath(r.choice(inside), os.path.dirname(d["path"]) or b".")]
                                    if inside else []))
        if op == "hardlink":
            d["to"] = self.new_path(r)
        return d

    def apply_local(self, d):
        p = os.path.join(self.P, d["path"]) if "path" in d else None
        r = random.Random(d["seed"])
        op = d["op"]
        try:
            if op in ("create", "unsendable"):
                if op == "unsendable":
                    p = os.path.join(os.path.dirname(p), b".gpurun-tmp-" + os.path.basename(p))
                    d.setdefault("size", 10)
                    d.setdefault("kind", "text")
                if os.path.lexists(p):
                    return False
                write(p, content(d["kind"], d["size"], d["seed"]), r)
            elif op == "mkdir":
                os.mkdir(p)
            elif op == "edit":
                size = os.path.getsize(p)
                if not size:
                    return False
                with open(p, "r+b") as f:
                    for _ in range(r.randint(1, 3)):
                        off = r.randrange(size)
                        n = min(size - off, r.choice([1, 100, 4096, 70000, 1 << 20]))
                        f.seek(off)
                        f.write(r.randbytes(n))
            elif op == "append":
                with open(p, "ab") as f:
                    f.write(content(pick_kind(r), r.choice([1, 100, 5000, 1 << 20]), d["seed"]))
            elif op == "truncate":
                size = os.path.getsize(p)
                os.truncate(p, r.choice([0, size // 2, size + r.randint(1, 100000)]))
            elif op in ("rewrite", "dir2file"):
                if op == "dir2file":
                    shutil.rmtree(p)
                write(p, content(d["kind"], d["size"], d["seed"]), r)
            elif op == "rename":
                to = os.path.join(self.P, d["to"])
                if os.path.lexists(to) or (to + b"/").startswith(p + b"/"):
                    return False
                os.rename(p, to)
            elif op == "chmod":
                os.chmod(p, os.lstat(p).st_mode & 0o777 ^ 0o100)
            elif op == "touch":
                t = r.randint(1, 2 ** 31) * 10 ** 9 + r.randrange(10 ** 9)
                os.utime(p, ns=(t, t), follow_symlinks=False)
            elif op == "symlink":
                os.symlink(d["target"], p)
            elif op == "relink":
                os.unlink(p)
                os.symlink(d["target"], p)
            elif op in ("file2dir", "link2dir"):
                os.unlink(p)
                os.mkdir(p)
                if r.random() < 0.5:
                    write(os.path.join(p, b"inner"), b"inner %d\n" % d["seed"], r)
            elif op in ("file2link", "dir2link"):
                if op == "dir2link":
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
                os.symlink(d["target"], p)
            elif op == "delete":
                os.unlink(p)
            elif op == "rmdir":
                shutil.rmtree(p)
            elif op == "fifo":
                os.mkfifo(p, 0o600)
            elif op == "hardlink":
                os.link(p, os.path.join(self.P, d["to"]), follow_symlinks=False)
            else:
                return False
        except (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
                OSError):
            return False
        self.counts["ops"] += 1
        return True

    # -- the host's side

    def gen_host(self, r):
        op = weighted(r, HOST_OPS)
        ents = walk(self.R)
        pick = lambda kind: sorted(k for k, e in ents.items() if e[0] == kind and
                                   k.split(b"/")[0] != b".gpurun")
        files, dirs, links = pick("F"), pick("D"), pick("L")
        src = {"hedit": files, "hdelete": files + links, "hrmdir": dirs, "hchmod": files,
               "htouch": files, "hdir2link": dirs, "hlink2dir": links, "hfile2dir": files,
               "hhardlink": files}[op]
        if not src:
            return None
        return {"op": op, "path": r.choice(src), "seed": r.randint(0, 1 << 30)}

    def apply_host(self, d):
        p = os.path.join(self.R, d["path"])
        r = random.Random(d["seed"])
        op = d["op"]
        # another change to a path hard-linked before may be reported
        self.linked = [x for x in self.linked if x != d["path"] and
                       not x.startswith(d["path"] + b"/")]
        if op != "hhardlink":
            self.tampered.add(d["path"])
        try:
            if op == "hedit":
                size = os.path.getsize(p)
                with open(p, "r+b") as f:
                    if size and r.random() < 0.7:
                        f.seek(r.randrange(size))
                        f.write(r.randbytes(r.randint(1, 100)))
                    else:
                        f.truncate(0)
                        f.write(b"the host's version %d\n" % d["seed"])
            elif op == "hdelete":
                os.unlink(p)
            elif op == "hrmdir":
                shutil.rmtree(p)
            elif op == "hchmod":
                os.chmod(p, os.stat(p).st_mode & 0o777 ^ 0o100)
            elif op == "htouch":
                os.utime(p, ns=(10 ** 18, 10 ** 18))
            elif op == "hdir2link":  # rm -rf d && ln -s elsewhere d
                shutil.rmtree(p)
                os.symlink(self.outside_host, p)
            elif op in ("hlink2dir", "hfile2dir"):
                os.unlink(p)
                os.mkdir(p)
            elif op == "hhardlink":  # what a job's snapshot does
                os.link(p, os.path.join(self.work, b"hardlink-%d" % d["seed"]))
                if re.fullmatch(rb"[ -~]+", d["path"]) and b'"' not in d["path"] and \
                        b"\\" not in d["path"] and d["path"] not in self.tampered:
                    self.linked.append(d["path"])
            else:
                return False
        except OSError:
            return False
        self.counts["ops"] += 1
        return True

    # -- faults: a sync that something interrupts

    def gen_fault(self, r):
        kinds = ["kill-client", "kill-agent", "swap-local", "stall-agent"]
        if self.a.transport == "libssh2" and self.a.proxy_pid:
            kinds.append("cut")
        if self.a.tmpfs:
            kinds += ["disk-full", "disk-full"]
        return {"fault": r.choice(kinds), "when": r.random(), "seed": r.randint(0, 1 << 30)}

    def agent_pids(self):
        p = subprocess.run(["pgrep", "-f", self.a.agent_dir + "/agent-.* serve"],
                           capture_output=True, text=True)
        return [int(x) for x in p.stdout.split()]

    def faulty_sync(self, f):
        r = random.Random(f["seed"])
        old = signature(self.R, False, content=False)
        new = signature(self.P, True, content=False)
        ballast = os.path.join(self.a.tmpfs.encode(), b"ballast") if self.a.tmpfs else None
        if f["fault"] == "disk-full":
            vfs = os.statvfs(self.R if os.path.exists(self.R) else self.a.tmpfs)
            pending = sum(e[3] for e in walk(self.P).values() if e[0] == "F")
            left = int(r.random() * pending * 1.2)
            size = max(0, vfs.f_bavail * vfs.f_frsize - left)
            # On ext4 a file cannot take every free block (its extent
            # tree needs some): a little less, until it fits.
            for _ in range(40):
                if not size:
                    break
                try:
                    with open(ballast, "wb") as fh:
                        os.posix_fallocate(fh.fileno(), 0, size)
                    break
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    size = max(0, size - size // 200 - (64 << 10))
        swapped = None
        stopped = []
        delay = f["when"] * max(0.05, 1.5 * self.last_sync)
        p = self.gpurun("sync", "--yes", env={"GPURUN_IO_TIMEOUT": "2"}
                        if f["fault"] == "stall-agent" else None)
        if f["fault"] != "disk-full":
            time.sleep(delay)
            if f["fault"] == "kill-client":
                os.kill(p.pid, signal.SIGKILL)
            elif f["fault"] == "kill-agent":
                for pid in self.agent_pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            elif f["fault"] == "cut":
                os.kill(self.a.proxy_pid, signal.SIGUSR1)
            elif f["fault"] == "stall-agent":  # alive, and silent
                for pid in self.agent_pids():
                    try:
                        os.kill(pid, signal.SIGSTOP)
                        stopped.append(pid)
                    except ProcessLookupError:
                        pass
                t_stop = time.monotonic()
            elif f["fault"] == "swap-local":
                dirs = self.files(kinds="D")
                if dirs:
                    swapped = r.choice(dirs)
                    os.rename(os.path.join(self.P, swapped), self.aside)
                    os.symlink(self.outside_local, os.path.join(self.P, swapped))
        rc, err = self.finish(p)
        self.counts["faults"] += 1
        what = "a sync with fault %s" % f["fault"]
        if stopped:
            waited = time.monotonic() - t_stop
            for pid in stopped:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if waited > 20:
                raise Failure("%s: gpurun waited %.0f s for a silent agent (limit 2 s)\n%s"
                              % (what, waited, err))
            if rc != 0 and "nothing for 2 s" not in err:
                raise Failure("%s: it failed (exit %d), not for the silence:\n%s"
                              % (what, rc, err.rstrip()))
        if ballast and os.path.exists(ballast):
            os.unlink(ballast)
        if swapped is not None:
            os.unlink(os.path.join(self.P, swapped))
            os.rename(self.aside, os.path.join(self.P, swapped))
        if rc not in (0, -9) and "gpurun:" not in err:
            raise Failure("%s: it failed (exit %d) without saying why" % (what, rc))
        if f["fault"] == "disk-full" and rc != 0 and not re.search(r"[Nn]o space left", err):
            raise Failure("%s: it failed (exit %d) without naming the cause:\n%s"
                          % (what, rc, err.rstrip()))
        if f["fault"] == "swap-local" and rc != 0:
            raise Failure("%s: it failed (exit %d):\n%s" % (what, rc, err.rstrip()))
        now = signature(self.R, False, content=False)
        for k, e in now.items():
            # a temp file, or anything in a staged folder (a temp name)
            if any(UNSENDABLE.match(x) for x in k.split(b"/")) or k.split(b"/")[0] == b".gpurun":
                continue
            if e != old.get(k) and e != new.get(k) and not \
                    (swapped is not None and (k + b"/").startswith(swapped + b"/")):
                raise Failure("%s: %s on the host is neither its old nor its new version "
                              "(%s; old %s, new %s)" % (what, rel(k), e, old.get(k), new.get(k)))
        self.check_invariants(what, temps_ok=True)


class Failure(Exception):
    pass


def write(p, data, r):
    with open(p, "wb") as f:
        f.write(data)
    os.chmod(p, 0o700 if r.random() < 0.3 else 0o600)


# ---------------------------------------------------------------- a seed's run


def generate(a, seed, nbatches, big):
    """Generate and run at once (the generator looks at the tree it made)."""
    run = Run(a, seed, a.workdir)
    r = random.Random(seed)
    run.fresh()
    batches = []
    if big:
        batches.append({"ops": [{"op": "big", "seed": seed}]})
    try:
        if big:
            run_batch(run, batches[0], 0)
        for i in range(nbatches):
            b = {"ops": []}
            # (none: what the host changed alone, or a no-op)
            for _ in range(r.choice([0, 1, 2, 3, 5, 8, 8, 20])):
                d = run.gen_local(r, big_ok=r.random() < 0.3)
                if d and run.apply_local(d):
                    b["ops"].append(d)
            if big and r.random() < 0.5:
                b["ops"].append({"op": "mass", "seed": r.randint(0, 1 << 30)})
                apply_mass(run, b["ops"][-1])
            if r.random() < 0.2 and os.path.exists(run.R):
                b["host"] = []
                for _ in range(r.randint(1, 3)):
                    d = run.gen_host(r)
                    if d and run.apply_host(d):
                        b["host"].append(d)
            if r.random() < 0.08 or (big and i == 0):
                b["lose_state"] = True  # a fresh clone (big: the manifest past a frame)
            if r.random() < 0.25:
                b["fault"] = run.gen_fault(r)
            if r.random() < 0.2:
                b["again"] = True  # then a sync that must find nothing to do
            batches.append(b)
            sync_batch(run, b, len(batches) - 1)
    except Failure as e:
        return batches, run, str(e)
    return batches, run, None


def apply_mass(run, d):
    """Big family: a change to thousands of files at once."""
    r = random.Random(d["seed"])
    dirs = [x for x in run.files(kinds="D") if x.startswith(b"mass")]
    if not dirs:
        return
    top = os.path.join(run.P, r.choice(dirs))
    how = r.choice(["chmod", "touch", "rm", "host-touch"])
    if how == "rm":
        shutil.rmtree(top)
        return
    if how == "host-touch":
        top = os.path.join(run.R, os.path.relpath(top, run.P))
        if not os.path.isdir(top):
            return
    for dp, _, fns in os.walk(top):
        for n in fns:
            q = os.path.join(dp, n)
            if how == "chmod":
                os.chmod(q, os.stat(q).st_mode ^ 0o100)
            else:
                os.utime(q, ns=(10 ** 18, 10 ** 18 + r.randrange(10 ** 9)))
    run.counts["ops"] += 1


def big_tree(run, seed):
    """100,000+ files with long names and distinct content: the manifest
    does not compress below the frame limit."""
    r = random.Random(seed)
    for d in range(100):
        p = os.path.join(run.P, b"mass-%02d-%s" % (d, r.randbytes(12).hex().encode()))
        os.makedirs(p)
        for f in range(1010):
            with open(os.path.join(p, r.randbytes(40).hex().encode()), "wb") as fh:
                fh.write(b"%d/%d\n" % (d, f))
    run.counts["ops"] += 1


def run_batch(run, b, i):
    """Replay a recorded batch (ops that no longer apply are skipped)."""
    for d in b.get("ops", []):
        if d["op"] == "big":
            big_tree(run, d["seed"])
        elif d["op"] == "mass":
            apply_mass(run, d)
        else:
            run.apply_local(dict(d))
    if os.path.exists(run.R):
        for d in b.get("host", []):
            run.apply_host(d)
    sync_batch(run, b, i)


def sync_batch(run, b, i):
    if b.get("lose_state"):
        shutil.rmtree(os.path.join(run.P, b".gpurun"), ignore_errors=True)
    if b.get("fault"):
        run.faulty_sync(b["fault"])
    run.clean_sync("batch %d" % (i + 1))
    if b.get("again"):
        run.noop_sync("batch %d, again" % (i + 1))


def replay(a, seed, batches):
    run = Run(a, seed, a.workdir)
    run.fresh()
    try:
        for i, b in enumerate(batches):
            run_batch(run, b, i)
    except Failure as e:
        return str(e)
    return None


def shrink(a, seed, batches, budget_s):
    """Smallest sequence that still fails: whole batches first, then the
    steps inside each (ops, host changes, the fault, the state loss)."""
    t_end = time.monotonic() + budget_s
    best = batches
    n = 2
    while len(best) >= 2 and time.monotonic() < t_end:
        chunk = max(1, len(best) // n)
        reduced = False
        for start in range(0, len(best), chunk):
            cand = best[:start] + best[start + chunk:]
            if cand and time.monotonic() < t_end and replay(a, seed, cand):
                best, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(best), n * 2)
    for i in range(len(best)):
        for key in ("fault", "lose_state", "again", "host", "ops"):
            if key not in best[i] or time.monotonic() >= t_end:
                continue
            if key in ("host", "ops"):
                j = 0
                while j < len(best[i][key]) and time.monotonic() < t_end:
                    cand = [dict(x) for x in best]
                    cand[i][key] = best[i][key][:j] + best[i][key][j + 1:]
                    if replay(a, seed, cand):
                        best = cand
                    else:
                        j += 1
            else:
                cand = [dict(x) for x in best]
                del cand[i][key]
                if replay(a, seed, cand):
                    best = cand
    return best, replay(a, seed, best)


def show(batches):
    out = []
    for i, b in enumerate(batches):
        out.append("  batch %d:" % (i + 1))
        for d in b.get("ops", []):
            out.append("    here: " + " ".join("%s=%r" % kv for kv in d.items()))
        for d in b.get("host", []):
            out.append("    host: " + " ".join("%s=%r" % kv for kv in d.items()))
        if b.get("lose_state"):
            out.append("    the local state (.gpurun/) is lost")
        if b.get("fault"):
            out.append("    a sync with fault %(fault)s at %(when).2f of its time" % b["fault"])
        out.append("    then a clean sync")
        if b.get("again"):
            out.append("    then a sync that finds nothing to do")
    return "\n".join(out)


def seeds_of(spec):
    a, _, b = spec.partition("-")
    return range(int(a), int(b or a) + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpurun", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--transport", default="local")
    ap.add_argument("--host", default="")
    ap.add_argument("--proxy-pid", type=int, default=0)
    ap.add_argument("--tmpfs", default="")
    ap.add_argument("--agent-dir", default=os.path.expanduser("~/.cache/gpurun"))
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--parity", default="all", choices=["all", "odd", "even"])
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--big-every", type=int, default=0)
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-seconds", type=int, default=int(os.environ.get("MODEL_SHRINK_S", "600")))
    ap.add_argument("--replay", default="")
    a = ap.parse_args()
    a.workdir = os.path.abspath(a.work).encode()
    os.makedirs(a.workdir, exist_ok=True)
    t0 = time.monotonic()
    if a.replay:
        rec = ast.literal_eval(open(a.replay).read())
        err = replay(a, rec["seed"], rec["batches"])
        print("replay of seed %d: %s" % (rec["seed"], err or "passes"))
        return 1 if err else 0
    totals = {"seeds": 0, "batches": 0, "ops": 0, "faults": 0, "syncs": 0, "host_changed": 0,
              "failed": 0}
    for seed in seeds_of(a.seeds):
        if (a.parity == "odd" and seed % 2 == 0) or (a.parity == "even" and seed % 2):
            continue
        # 100k files: seeds N*K and N*K+K/2+1 (one even, one odd: both
        # transports when make soak splits them by parity)
        big = a.big_every and seed % a.big_every in (0, a.big_every // 2 + 1)
        ts = time.monotonic()
        batches, run, err = generate(a, seed, 3 if big else a.batches, big)
        totals["seeds"] += 1
        totals["batches"] += len(batches)
        for k in ("ops", "faults", "syncs", "host_changed"):
            totals[k] += run.counts[k]
        if not err:
            print("ok - seed %d%s (%s, delta_min %s): %d batches, %d operations, %d faults, "
                  "%d syncs (%d on the host's changes), %.1f s"
                  % (seed, " (100k files)" if big else "", a.transport, run.delta_min,
                     len(batches), run.counts["ops"], run.counts["faults"],
                     run.counts["syncs"], run.counts["host_changed"],
                     time.monotonic() - ts), flush=True)
            continue
        totals["failed"] += 1
        print("not ok - seed %d (%s): %s" % (seed, a.transport, err), flush=True)
        best, err2 = batches, err
        if not a.no_shrink:
            best, err2 = shrink(a, seed, batches, a.shrink_seconds)
            if not err2:  # did not fail again: show the whole run
                best, err2 = batches, err + "\n  (it did not fail again when replayed)"
        path = os.path.join(a.workdir, b"failed-seed-%d.py" % seed)
        with open(path, "w") as f:
            f.write(repr({"seed": seed, "batches": best}))
        argv = [x for i, x in enumerate(sys.argv) if x not in ("--seeds", "--parity") and
                (i == 0 or sys.argv[i - 1] not in ("--seeds", "--parity"))]
        print("# seed %d, the smallest failing sequence (%d of %d batches):\n%s\n# %s\n"
              "# replay: %s --replay %s" % (seed, len(best), len(batches), show(best),
                                            err2.replace("\n", "\n# "),
                                            " ".join(shlex.quote(x) for x in argv), rel(path)),
              flush=True)
    print("%(seeds)d seeds, %(batches)d batches, %(ops)d operations, %(faults)d faults, "
          "%(syncs)d syncs (%(host_changed)d on the host's changes): %(failed)d failed" % totals + ", %.0f s" % (time.monotonic() - t0))
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
