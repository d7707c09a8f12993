#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/fuzz_host.c into corpus/host/: one
well-formed answer of each kind the host sends (the first byte picks the
reader), so the fuzzer starts past the readers' first checks. Run it again
if a format changes:  python3 tests/fuzz/corpus/make_host_seeds.py
(regress-* beside them are inputs that once failed, kept by hand: every
run replays them first.)"""
import hashlib
import os
import struct
import subprocess

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host")


def u8(v): return struct.pack(">B", v)
def u32(v): return struct.pack(">I", v)
def u64(v): return struct.pack(">Q", v)
def bts(b): return u32(len(b)) + b
def s(t): return bts(t.encode())


def entries(with_host):
    h = hashlib.blake2b(b"hello", digest_size=32).digest()
    out = s("a") + u8(2) + (u64(1) + u64(4096) + u64(0) + u64(0) if with_host else b"")
    out += s("a/b") + u8(1) + u32(0o644) + u64(5) + u64(1700000000000000000) + bts(h)
    out += u64(2) + u64(5) + u64(0) + u64(0) if with_host else b""
    out += s("c") + u8(3) + s("a/b") + (u64(3) + u64(3) + u64(0) + u64(0) if with_host else b"")
    return out


def manifest(with_host):
    return b"GRSM" + u32(1) + u8(with_host) + u32(3) + entries(with_host)


def zstd(b):
    return subprocess.run(["zstd", "-q", "-c"], input=b, stdout=subprocess.PIPE, check=True).stdout


def record(pairs):
    return u32(len(pairs)) + b"".join(s(k) + s(v) for k, v in pairs)


REC = [("id", "20261124-120000-ab12"), ("state", "done"), ("created_ms", "1795536000000"),
       ("start_ms", "1795536000100"), ("end_ms", "1795536060100"), ("has_status", "1"),
       ("code", "0"), ("command", "python3 train.py"), ("name", "run-1"),
       ("git_commit", "0123456789abcdef0123456789abcdef01234567")]


def weak(block):
    h = 1
    for c in block:
        h = (h * 0x08104225 + c) & 0xFFFFFFFF
    return h


def basis():  # fuzz_host.c's old file
    x, out = 12345, bytearray()
    for _ in range(5000):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        out.append((x >> 16) & 0xFF)
    return bytes(out)


def signature(data, block=2048):
    out = u32(0x72730147) + u32(block) + u32(32)
    for i in range(0, len(data), block):
        b = data[i:i + block]
        out += u32(weak(b)) + hashlib.blake2b(b, digest_size=32).digest()
    return out


seeds = {
    "manifest": b"\x00" + manifest(0),
    "manifest-host": b"\x01" + manifest(1),
    "manifest-z": b"\x02" + zstd(manifest(0)),
    "state": b"\x03" + u32(2) + bts(b"\x11" * 32) + s("/home/u/proj") + u64(1 << 30)
             + u32(2) + u8(1) + s("a/b") + u8(1) + u32(0o644) + u64(5) + u64(0) + bts(b"\x22" * 32)
             + u8(2) + s("gone.txt") + bts(zstd(manifest(0))) + u32(1) + s("a warning"),
    "job-list": b"\x04" + u32(1) + record(REC) + u64(123456),
    "job-stop": b"\x05" + record(REC) + u32(3) + u8(1) + u32(1) + u32(4242) + s("python3")
                + u32(1) + u32(4242) + s("GPU-0") + u32(1) + s("gpurun-job") + u8(0) + s(""),
    "job-gpus": b"\x06" + u8(1) + s("") + u32(1) + u32(0) + s("GPU-0") + s("NVIDIA H100")
                + u32(50) + u64(1000) + u64(80000) + s("") + u32(1) + u32(4242) + s("GPU-0")
                + u64(1000) + s("python3") + s("20261124-120000-ab12"),
    "signature": b"\x07" + signature(basis()),
    # [max_out][split] magic, LITERAL 5 "hello", COPY_N2_N2 100 300, END
    "delta": b"\x08" + struct.pack(">HH", 4096, 7) + u32(0x72730236) + b"\x05hello"
             + b"\x4a" + struct.pack(">HH", 100, 300) + b"\x00",
    # the whole old file, one byte overwritten in its last block
    "round-trip": b"\x09" + struct.pack(">H", 5000) + bytes([0, 0x12, 0x00, 0]),
    # and with an insert, a delete and a moved block
    "round-trip-2": b"\x09" + struct.pack(">H", 5000) + bytes([1, 0, 9, 2, 2, 0x10, 0, 1, 3, 0x01, 0x20, 3]),
    # a log with colour, a progress bar, OSC 52, a title, DCS, a clear, bad UTF-8
    "log": b"\x0a" + b"\x07" + b"step 1\n\x1b[1;32mgreen\x1b[0m 50%\x1b[K\r\x1b]52;c;ZXZpbA==\x07"
           b"\x1b]0;pwned\x1b\\\x1bP+q544e\x1b\\\x1b[2J\x1b[?1049h\xe2\x9c\x93 \xff\xc2\x9b done\n",
    "one-line": b"\x0b" + b"run\x1b]0;t\x07ning \xe2\x80\xae evil \xc2\x85 \xff",
}
os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
