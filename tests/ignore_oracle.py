#!/usr/bin/env python3
"""Generated trees against git: for each seed, make a random tree with
random .gitignore files (plus sometimes .git/info/exclude, a global
core.excludesFile, core.ignoreCase and files tracked with `git add -f`)
from a grammar of tricky pattern pieces, then compare what gpurun's scan
would sync (tests/helpers/scan_dump) with git's answer: files from
`git ls-files --cached --others --exclude-standard`, folders from
`git check-ignore` plus the folders holding a kept file. Prints the seed
and the differences on a mismatch.

  ignore_oracle.py SCAN_DUMP WORKDIR FIRST_SEED COUNT
"""
import os
import random
import shutil
import subprocess
import sys

NAMES = [b"a", b"b", b"ab", b"ba", b"a.o", b"b.o", b"x.txt", b"foo", b"Foo",
         b"bar", b"build", b"keep", b"keep.o", b"x y", b"#a", b"!a", b"a ",
         b"[a]", b"a*", b"doc", b"sub", b"-x", b"\xc3\xa9t\xc3\xa9", b"caf\xe9",
         b"new\nline", b".hidden", b"a.b.c", b"q?", b"tab\tname", b"back\\slash"]

SEGMENTS = ["a", "b", "ab", "foo", "Foo", "bar", "build", "keep", "doc", "sub",
            "*", "?", "*.o", "a*", "*a", "*b*", "[ab]", "[!a]*", "[a-c]", "[^b]?",
            "[[:alpha:]]*", "[[:digit:]]", "[[:space:]]*", "[]a]", "**", "a**",
            "**b", "\\#a", "\\!a", "x\\ y", "?.txt", "*.[ot]*", "[a-]*", "\\[a]",
            "keep.o", ".hidden", "x y", "caf?", "\\*", "\\?", "*\\ ", "A*", "[A-Z]*",
            "FOO", "a**/b", "s**", "*.O", "[[:upper:]]*"]


def gen_pattern(rng):
    r = rng.random()
    if r < 0.05:
        return "# comment " + rng.choice(SEGMENTS)
    if r < 0.08:
        return ""
    p = ""
    if rng.random() < 0.25:
        p += "!"
    r = rng.random()
    if r < 0.2:
        p += "/"
    elif r < 0.3:
        p += "**/"
    segs = [rng.choice(SEGMENTS) for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
    p += "/".join(segs)
    r = rng.random()
    if r < 0.2:
        p += "/"
    elif r < 0.25:
        p += "/**"
    elif r < 0.28:
        p += "/**/"
    r = rng.random()
    if r < 0.05:
        p += "  "
    elif r < 0.07:
        p += "\\ "
    elif r < 0.08:
        p += "\r"
    return p


def gen_ignore_file(rng):
    lines = [gen_pattern(rng) for _ in range(rng.randint(1, 6))]
    return ("\n".join(lines) + ("\n" if rng.random() < 0.8 else "")).encode()


def gen_tree(rng, top, depth):
    """Entries of one folder; returns nothing, writes to disk."""
    n = rng.randint(4 if depth == 0 else 0, (12, 8, 6, 4, 3)[depth])
    names = rng.sample(NAMES, n)
    for name in names:
        path = os.path.join(top, name)
        r = rng.random()
        if r < 0.35 and depth < 4:
            os.mkdir(path)
            gen_tree(rng, path, depth + 1)
        elif r < 0.33:
            os.symlink(rng.choice([b"a", b"../x", b"/etc/passwd", b"sub"]), path)
        else:
            with open(path, "wb") as f:
                f.write(b"x" * rng.randint(0, 3))
    if rng.random() < 0.45:
        with open(os.path.join(top, b".gitignore"), "wb") as f:
            f.write(gen_ignore_file(rng))


def walk(top):
    """All entries under top (bytes, relative), split in dirs and others."""
    dirs, others = [], []
    for cur, dnames, fnames in os.walk(top):
        rel = os.path.relpath(cur, top)
        if rel == b".":
            rel = b""
        if rel.split(b"/")[0] == b".git":
            continue
        for d in dnames:
            p = os.path.join(rel, d) if rel else d
            if d == b".git":
                continue
            # os.walk lists symlinks to folders among dnames
            if os.path.islink(os.path.join(top, p)):
                others.append(p)
            else:
                dirs.append(p)
        for f in fnames:
            others.append(os.path.join(rel, f) if rel else f)
    return dirs, others


def git(args, cwd, env, stdin=None):
    r = subprocess.run(["git"] + args, cwd=cwd, env=env, input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode not in (0, 1):
        raise RuntimeError("git %s: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
    return r.stdout


def one(scan_dump, work, seed, env):
    rng = random.Random(seed)
    top = os.path.join(work, b"tree-%d" % seed)
    home = env["HOME"].encode()
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    gen_tree(rng, top, 0)
    git(["init", "-q", "."], top, env)
    icase = rng.random() < 0.15
    if icase:
        git(["config", "core.ignorecase", "true"], top, env)
    if rng.random() < 0.3:
        with open(os.path.join(top, b".git/info/exclude"), "wb") as f:
            f.write(gen_ignore_file(rng))
    gitconfig = os.path.join(home, b".gitconfig")
    if os.path.exists(gitconfig):
        os.unlink(gitconfig)
    if rng.random() < 0.3:
        ex = os.path.join(home, b"global-ignore-%d" % seed)
        with open(ex, "wb") as f:
            f.write(gen_ignore_file(rng))
        with open(gitconfig, "wb") as f:
            f.write(b'[core]\n\texcludesFile = "~/global-ignore-%d"\n' % seed)

    dirs, others = walk(top)
    # (not with ignoreCase: git refuses names that differ only in case)
    if rng.random() < 0.25 and not icase:
        files = [p for p in others if not os.path.islink(os.path.join(top, p))]
        tracked = [p for p in files if rng.random() < 0.15]
        if tracked:
            git(["--literal-pathspecs", "add", "-f", "--"] + [os.fsdecode(p) for p in tracked],
                top, env)

    r = subprocess.run([scan_dump, "-z", top], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        return ["scan_dump failed: " + r.stderr.decode(errors="replace")], 0, 0
    got = set(p for p in r.stdout.split(b"\0") if p)

    files = set(p for p in git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                               top, env).split(b"\0") if p)
    ignored_dirs = set()
    if dirs:
        out = git(["check-ignore", "-z", "--no-index", "--stdin"], top, env,
                  stdin=b"\0".join(dirs) + b"\0")
        ignored_dirs = set(p for p in out.split(b"\0") if p)
    want = files | set(d + b"/" for d in dirs if d not in ignored_dirs)
    # The folders that hold a kept file (a tracked file in an ignored one).
    for f in files:
        parts = f.split(b"/")[:-1]
        for i in range(1, len(parts) + 1):
            want.add(b"/".join(parts[:i]) + b"/")
    problems = []
    for p in sorted(want - got):
        problems.append("git syncs, gpurun does not: %r" % p)
    for p in sorted(got - want):
        problems.append("gpurun syncs, git does not: %r" % p)
    return problems, len(dirs) + len(others), len(want)


def main():
    scan_dump, work = sys.argv[1], os.fsencode(sys.argv[2])
    first, count = int(sys.argv[3]), int(sys.argv[4])
    env = dict(os.environ)
    env["HOME"] = os.fsdecode(os.path.join(work, b"home"))
    env.pop("XDG_CONFIG_HOME", None)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(k, None)
    os.makedirs(os.path.join(work, b"home"), exist_ok=True)
    bad = paths = kept = 0
    for seed in range(first, first + count):
        problems, n, k = one(scan_dump, work, seed, env)
        paths += n
        kept += k
        if problems:
            bad += 1
            print("seed %d: %d differences (tree kept in %s)" %
                  (seed, len(problems), os.fsdecode(os.path.join(work, b"tree-%d" % seed))))
            for p in problems[:20]:
                print("  " + p)
        else:
            shutil.rmtree(os.path.join(work, b"tree-%d" % seed))
    print("%d trees, %d paths compared (%d synced, %d ignored), %d trees differ" %
          (count, paths, kept, paths - kept, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
