#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/fuzz_art.c into corpus/art/: tar
archives (before zstd, which the target adds) as the agent sends them,
and the hostile shapes gpurun must refuse. Run it again if a format
changes:  python3 tests/fuzz/corpus/make_art_seeds.py"""
import io
import os
import tarfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "art")


def tar(*members):
    """The archive, cut after its end blocks (no padding to 10 KiB)."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data, pax in members:
            i = tarfile.TarInfo(name)
            i.mtime = 1700000000
            i.mode = 0o644
            if pax:
                i.pax_headers = pax
            if kind == "file":
                i.size = len(data)
                t.addfile(i, io.BytesIO(data))
            elif kind == "dir":
                i.type = tarfile.DIRTYPE
                i.mode = 0o755
                t.addfile(i)
            elif kind == "sym":
                i.type = tarfile.SYMTYPE
                i.linkname = data
                t.addfile(i)
            elif kind == "hard":
                i.type = tarfile.LNKTYPE
                i.linkname = data
                t.addfile(i)
        end = t.offset
    return b.getvalue()[:end + 1024]


def f(name, data=b"hello\n", pax=None):
    return (name, "file", data, pax)


seeds = {
    "files": tar(("ckpt", "dir", None, None), f("ckpt/step1.pt", b"\x00" * 100), f("train.log")),
    "sub": tar(f("sub/a.txt")),
    "resume": tar(f("r.bin", b"defgh", {"SCHILY.xattr.gpurun.resume": "3"})),
    "delta": tar(f("x", b"d", {"SCHILY.xattr.gpurun.delta": "8 " + "00" * 32})),
    "through-link": tar(f("link/x")),
    "resume-through-link": tar(f("link/victim", b"defgh", {"SCHILY.xattr.gpurun.resume": "3"})),
    "dotdot": tar(f("../outside/victim")),
    "absolute": tar(f("/tmp/abs")),
    "symlink": tar(("s", "sym", "../outside/victim", None)),
    "hardlink": tar(f("a"), ("h", "hard", "../outside/victim", None)),
    "link-dir": tar(("link", "dir", None, None), f("link/victim")),
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as fh:
        fh.write(data)
