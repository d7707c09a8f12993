#!/usr/bin/env python3
"""Model-based randomized test of `gpurun pull` (tests/t/t0413-pull-model.sh).

A seeded generator of operations on one job's artifacts on the host
(files written, changed in place, 10 % of them rewritten in spread
pieces or shifted by bytes inserted at the front, appended to, cut,
removed) and of pulls (a large file pulled before and changed since comes
as a delta against the copy in runs/: PROTOCOL.md, ART_PULL: deltas),
some of them killed at a random moment (SIGKILL of gpurun: the
connection drops mid-stream, as when a laptop sleeps). Invariants:

  after every step: each file under runs/<job>/ (part files aside) holds
      some version the host had of it: a pull never leaves a torn file
      under a name;
  after every clean pull: exit 0; every artifact on the host is in
      runs/<job>/ with the host's bytes and mtime; no part file is left.

The seed is printed; on a failure the operation list is shrunk (one
operation dropped at a time, kept out while the failure stays) and the
shortest failing list printed. Kills make a run timing-dependent, so a
shrunk list may not fail again: it says so.
"""
import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time

MiB = 1 << 20


def sha(b):
    return hashlib.sha256(b).hexdigest()


def gen_ops(rnd, steps):
    ops, names = [], set()
    for _ in range(steps):
        r = rnd.random()
        if not names or r < 0.25:
            name = 'f%d.bin' % rnd.randrange(6)
            size = rnd.choice([0, rnd.randrange(1, 5000), rnd.randrange(MiB, 3 * MiB), rnd.randrange(4 * MiB, 12 * MiB)])
            ops.append(('write', name, size, rnd.randrange(1 << 30)))
            names.add(name)
        elif r < 0.35:
            name = rnd.choice(sorted(names))
            ops.append(('change', name, rnd.random(), rnd.randrange(1 << 30)))
        elif r < 0.39:
            name = rnd.choice(sorted(names))
            ops.append(('edit', name, rnd.choice([5, 10, 30]), rnd.randrange(1 << 30)))
        elif r < 0.41:
            name = rnd.choice(sorted(names))
            ops.append(('shift', name, rnd.randrange(1, 5000), rnd.randrange(1 << 30)))
        elif r < 0.45:
            name = rnd.choice(sorted(names))
            ops.append(('append', name, rnd.randrange(1, MiB), rnd.randrange(1 << 30)))
        elif r < 0.49:
            name = rnd.choice(sorted(names))
            ops.append(('cut', name, rnd.random()))
        elif r < 0.53:
            name = rnd.choice(sorted(names))
            ops.append(('remove', name))
            names.discard(name)
        elif r < 0.78:
            if rnd.random() < 0.5:  # something large to cut through
                name = 'f%d.bin' % rnd.randrange(6)
                ops.append(('write', name, rnd.randrange(4 * MiB, 12 * MiB), rnd.randrange(1 << 30)))
                names.add(name)
            ops.append(('pull_killed', rnd.randrange(40, 220)))
        else:
            ops.append(('pull',))
    ops.append(('pull',))
    return ops


class Run:
    def __init__(self, a, work):
        self.a = a
        self.work = work
        shutil.rmtree(work, ignore_errors=True)
        self.proj = os.path.join(work, 'proj')
        os.makedirs(self.proj)
        with open(os.path.join(self.proj, 'gpurun.ini'), 'w') as f:
            f.write('[remote]\nhost = local\ntransport = local\npath = %s\n'
                    '[build]\ncommand =\n[artifacts]\npull = out\n[train]\ncommand = mkdir -p out\n'
                    % os.path.join(work, 'remote'))
        self.id = self.gr('-q', 'train', '--detach').stdout.strip()
        self.gr('-q', 'logs', '-f', self.id)
        roots = os.path.join(os.environ['HOME'], '.cache/gpurun/jobs')
        self.jd = next(os.path.join(roots, p, self.id) for p in os.listdir(roots)
                       if os.path.isdir(os.path.join(roots, p, self.id)))
        self.out = os.path.join(self.jd, 'out')
        self.runs = os.path.join(self.proj, 'runs', self.id, 'out')
        self.seen = {}  # name -> set of content hashes the host has had
        self.parts_left = 0  # killed pulls that left a part to resume
        self.delta_pulls = 0  # clean pulls that brought a file as a delta

    def gr(self, *args, check=True):
        p = subprocess.run([self.a.gpurun] + list(args), cwd=self.proj, capture_output=True,
                           text=True, timeout=300)
        if check and p.returncode != 0:
            raise AssertionError('gpurun %s: exit %d: %s' % (' '.join(args), p.returncode, p.stderr))
        return p

    def note(self, name):
        with open(os.path.join(self.out, name), 'rb') as f:
            self.seen.setdefault(name, set()).add(sha(f.read()))

    def apply(self, op):
        kind = op[0]
        if kind == 'write':
            _, name, size, seed = op
            os.makedirs(self.out, exist_ok=True)
            with open(os.path.join(self.out, name), 'wb') as f:
                f.write(random.Random(seed).randbytes(size))
            self.note(name)
        elif kind in ('edit', 'shift'):
            p = os.path.join(self.out, op[1])
            if not os.path.exists(p):
                return
            rnd = random.Random(op[3])
            with open(p, 'r+b') as f:
                data = bytearray(f.read())
                if kind == 'edit':  # op[2] % of it, in 64 KiB pieces
                    piece = 64 << 10
                    for _ in range(len(data) * op[2] // 100 // piece + 1):
                        off = rnd.randrange(len(data) + 1)
                        data[off:off + piece] = rnd.randbytes(len(data[off:off + piece]))
                else:  # op[2] bytes inserted at the front: every block moves
                    data[0:0] = rnd.randbytes(op[2])
                f.seek(0)
                f.write(data)
                f.truncate(len(data))
            self.note(op[1])
        elif kind in ('change', 'append', 'cut'):
            p = os.path.join(self.out, op[1])
            if not os.path.exists(p):
                return
            n = os.path.getsize(p)
            with open(p, 'r+b') as f:
                if kind == 'change' and n:
                    off = int(op[2] * n)
                    f.seek(off)
                    f.write(random.Random(op[3]).randbytes(min(n - off, 64 << 10)))
                elif kind == 'append':
                    f.seek(0, 2)
                    f.write(random.Random(op[3]).randbytes(op[2]))
                elif kind == 'cut':
                    f.truncate(int(op[2] * n))
            self.note(op[1])
        elif kind == 'remove':
            p = os.path.join(self.out, op[1])
            if os.path.exists(p):
                os.unlink(p)
        elif kind == 'pull_killed':
            p = subprocess.Popen([self.a.gpurun, '-q', 'pull', self.id], cwd=self.proj,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(op[1] / 1000)
            p.send_signal(signal.SIGKILL)
            p.wait()
            time.sleep(0.05)  # its extractor keeps its part (the next pull waits for it anyway)
            if os.path.isdir(self.runs) and any('.gpurun-part' in n for n in os.listdir(self.runs)):
                self.parts_left += 1
        elif kind == 'pull':
            p = self.gr('pull', self.id)
            if ' as a delta' in p.stderr or ' as deltas' in p.stderr:
                self.delta_pulls += 1
            self.check_clean()
        self.check_untorn()

    def check_untorn(self):
        if not os.path.isdir(self.runs):
            return
        for dp, _, fs in os.walk(self.runs):
            for n in fs:
                if '.gpurun-part' in n:
                    continue
                rel = os.path.relpath(os.path.join(dp, n), self.runs)
                with open(os.path.join(dp, n), 'rb') as f:
                    h = sha(f.read())
                if h not in self.seen.get(rel, ()):
                    raise AssertionError("runs/.../out/%s holds bytes the host never had" % rel)

    def check_clean(self):
        host = sorted(os.listdir(self.out)) if os.path.isdir(self.out) else []
        for n in host:
            hp, lp = os.path.join(self.out, n), os.path.join(self.runs, n)
            if not os.path.exists(lp):
                raise AssertionError('after a clean pull, %s is missing' % n)
            with open(hp, 'rb') as f, open(lp, 'rb') as g:
                if f.read() != g.read():
                    raise AssertionError('after a clean pull, %s differs from the host' % n)
            if os.stat(hp).st_mtime_ns != os.stat(lp).st_mtime_ns:
                raise AssertionError('after a clean pull, %s has another mtime' % n)
        if os.path.isdir(self.runs):
            for dp, _, fs in os.walk(os.path.dirname(self.runs)):
                for n in fs:
                    if '.gpurun-part' in n:
                        raise AssertionError('after a clean pull, a part file is left: %s' % n)


def run_ops(a, ops, work, stats=None):
    """None, or (index of the failing op, message)."""
    r = Run(a, work)
    for i, op in enumerate(ops):
        try:
            r.apply(op)
        except AssertionError as e:
            return i, str(e)
    if stats is not None:
        stats['parts'] = r.parts_left
        stats['deltas'] = r.delta_pulls
    # A passing seed leaves nothing: 500 seeds of ~40 MB each filled the disk.
    # A failing one keeps its files to look at.
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(os.path.dirname(r.jd), ignore_errors=True)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--gpurun', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--seeds', default='1-3')
    ap.add_argument('--steps', type=int, default=14)
    ap.add_argument('--shrink-runs', type=int, default=25)
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition('-')
    failed = 0
    for seed in range(int(lo), int(hi or lo) + 1):
        ops = gen_ops(random.Random(seed), a.steps)
        t0 = time.time()
        stats = {}
        res = run_ops(a, ops, os.path.join(a.work, 'seed%d' % seed), stats)
        if res is None:
            kills = sum(1 for o in ops if o[0] == 'pull_killed')
            print('ok seed %d: %d operations (%d pulls killed, %d left a part to resume; '
                  '%d clean pulls brought deltas) in %.1f s' %
                  (seed, len(ops), kills, stats['parts'], stats['deltas'], time.time() - t0))
            continue
        failed += 1
        i, msg = res
        print('FAIL seed %d at operation %d %r: %s' % (seed, i, ops[i], msg))
        cur = ops[:i + 1]
        runs = 0
        k = 0
        while k < len(cur) and runs < a.shrink_runs:
            trial = cur[:k] + cur[k + 1:]
            runs += 1
            if trial and run_ops(a, trial, os.path.join(a.work, 'shrink')) is not None:
                cur = trial
            else:
                k += 1
        again = run_ops(a, cur, os.path.join(a.work, 'shrink'))
        print('  shrunk to %d operations%s:' % (len(cur), '' if again else ' (did not fail again: timing)'))
        for o in cur:
            print('    %r' % (o,))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
