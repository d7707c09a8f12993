#!/usr/bin/env python3
"""A lying gpurun agent, for the hostile-host tests (tests/t/t0600-*).

Installed as $HOME/.cache/gpurun/agent-<HASH>-<ARCH>, where the bootstrap runs
the agent from, it starts the real agent ($HOSTILE_REAL_AGENT) and stands
between it and gpurun, speaking the frames of common/proto/PROTOCOL.md: the real
agent does the work (sync, builds, jobs), and what it answers is rewritten
as $HOSTILE says (comma-separated):

  id          the job id in JOB_START, JOB_STATUS, JOB_STOP, LOG_END and
              the first JOB_LIST record becomes $HOSTILE_ID_HEX (any bytes)
  state       the state of those records becomes $HOSTILE_STATE_HEX
  log-bytes   every LOG_DATA frame is cut into one-byte frames, so escape
              sequences and UTF-8 characters straddle frames
  art-bytes   ART_PULL's announcement says $HOSTILE_ART_BYTES bytes
              (and $HOSTILE_ART_FILES files, when set)
  count       JOB_LIST is answered with a count of 2^32-1 and 100 bytes
  gpu-count   JOB_GPUS is answered with a count of 2^32-1 GPUs and 100 bytes
  flood       before its first JOB_STATUS answer, $HOSTILE_FLOOD_MB MiB of
              DATA frames for a request nobody made
  bigframe    JOB_STATUS is answered with a header announcing 4 GiB
  field       the record field $HOSTILE_FIELD of those records becomes
              $HOSTILE_FIELD_HEX (e.g. a container image or runtime)
  ctr-name    JOB_STOP's list of the job's containers becomes one, named
              $HOSTILE_CTR_HEX
  ctr-check   CONTAINER_CHECK is answered, without the real agent, with
              runtime $HOSTILE_CTR_RT_HEX, a path and version holding
              escapes, image "present" and gpu $HOSTILE_CTR_GPU_HEX
  art-sig     the client's ART_PULL (not its plan round) is passed on with
              every signature's path made $HOSTILE_ART_SIG_PATH: the real
              agent then sends that file as a delta the client never
              asked for
  mute        no request reaches the real agent (those in the command
              line neither): the connection stays up, nothing answers
  slow        each request (those in the command line first) is held
              $HOSTILE_SLOW_S seconds, with a KEEPALIVE every second, then
              passed on: a busy agent, not a dead one

  mute-start  the agent never starts: no ready line, no HELLO, the
              connection stays up (a stopped agent, a host that hangs)
  mute-hello  the ready line, then nothing: no HELLO

The requests the command line carries (the bootstrap's early ones) are
taken out of it and handled first, as if they had come on stdin.
  slow-start  the same for JOB_START alone; $HOSTILE_MARK (if set) is
              made when the hold begins

Only what the scenario names changes; everything else passes through, so
the client meets a host that behaves until it lies.
"""
import os
import struct
import subprocess
import sys
import threading
import time

HDR = struct.Struct(">IHHI")
OK, ERROR, DATA = 0x02, 0x03, 0x04
JOB_START, JOB_LIST, JOB_STATUS, JOB_LOG = 0x40, 0x41, 0x42, 0x43
LOG_DATA, LOG_END, JOB_STOP, ART_PULL = 0x45, 0x46, 0x47, 0x60
CONTAINER_CHECK, JOB_GPUS = 0x4c, 0x48
KEEPALIVE = 0x08

SCEN = set(filter(None, os.environ.get("HOSTILE", "").split(",")))
out = sys.stdout.buffer
out_lock = threading.Lock()
types = {}            # request id -> type, from what the client sent
art_started = set()   # ART_PULL ids whose announcement went by


def env_bytes(name):
    return bytes.fromhex(os.environ.get(name, ""))


def read_exact(f, n):
    buf = b""
    while len(buf) < n:
        b = f.read(n - len(buf))
        if not b:
            return None
        buf += b
    return buf


class EarlyThenStdin:
    """The command line's frames, then stdin's, as one stream."""

    def __init__(self, early):
        self.early = early

    def read(self, n):
        if self.early:
            b, self.early = self.early[:n], self.early[n:]
            return b
        return sys.stdin.buffer.read(n)


def read_frame(f):
    h = read_exact(f, HDR.size)
    if h is None:
        return None
    ln, typ, flags, rid = HDR.unpack(h)
    p = read_exact(f, ln) if ln else b""
    if p is None:
        return None
    return typ, flags, rid, p


def frame(typ, flags, rid, payload):
    return HDR.pack(len(payload), typ, flags, rid) + payload


def send(b):
    with out_lock:
        out.write(b)
        out.flush()


def str_at(p, off):
    ln = struct.unpack_from(">I", p, off)[0]
    return off + 4 + ln


def replace_str(p, off, new):
    end = str_at(p, off)
    return p[:off] + struct.pack(">I", len(new)) + new + p[end:]


def rewrite_record(p, off):
    """A job record starts at off: u32 n, then n (str key, str value)
    pairs (common/proto/job_rec.h); the values of "id" and "state" are
    replaced (added when the agent left them out)."""
    n = struct.unpack_from(">I", p, off)[0]
    want = {}
    if "id" in SCEN:
        want[b"id"] = env_bytes("HOSTILE_ID_HEX")
    if "state" in SCEN:
        want[b"state"] = env_bytes("HOSTILE_STATE_HEX")
    if "field" in SCEN:
        want[os.environ["HOSTILE_FIELD"].encode()] = env_bytes("HOSTILE_FIELD_HEX")
    pos = off + 4
    for _ in range(n):
        kl = struct.unpack_from(">I", p, pos)[0]
        key = p[pos + 4:pos + 4 + kl]
        vpos = pos + 4 + kl
        if key in want:
            p = replace_str(p, vpos, want.pop(key))
        pos = str_at(p, vpos)
    for key, val in want.items():
        pair = struct.pack(">I", len(key)) + key + struct.pack(">I", len(val)) + val
        p = p[:pos] + pair + p[pos:]
        pos += len(pair)
        n += 1
    return p[:off] + struct.pack(">I", n) + p[off + 4:]


def record_end(p, off):
    """Where the record that starts at off ends."""
    n = struct.unpack_from(">I", p, off)[0]
    pos = off + 4
    for _ in range(2 * n):
        pos = str_at(p, pos)
    return pos


def rewrite_stop_containers(p):
    """JOB_STOP's answer: record, u32 nterm, u8 killed, u32 nsurv x (u32,
    str), u32 ngpu x (u32, str), u32 nctr x (str, u8), str error: the
    containers become one, $HOSTILE_CTR_HEX, stopped."""
    pos = record_end(p, 0) + 5
    for _ in range(2):
        k = struct.unpack_from(">I", p, pos)[0]
        pos += 4
        for _ in range(k):
            pos = str_at(p, pos + 4)
    k = struct.unpack_from(">I", p, pos)[0]
    end = pos + 4
    for _ in range(k):
        end = str_at(p, end) + 1
    name = env_bytes("HOSTILE_CTR_HEX")
    return p[:pos] + struct.pack(">I", 1) + struct.pack(">I", len(name)) + name + b"\0" + p[end:]


def ctr_check_answer():
    kv = [(b"runtime", env_bytes("HOSTILE_CTR_RT_HEX")),
          (b"path", b"/usr/bin/podman\x1b]0;pwned\x07"), (b"version", b"4.3.1\x1b[2J"),
          (b"image", b"present"), (b"gpu", env_bytes("HOSTILE_CTR_GPU_HEX")),
          (b"cdi", b""), (b"toolkit", b""), (b"nvidia_smi", b"")]
    out = struct.pack(">I", len(kv))
    for k, v in kv:
        out += struct.pack(">I", len(k)) + k + struct.pack(">I", len(v)) + v
    return out


def rewrite_art_sigs(p):
    """ART_PULL with its signatures' paths replaced (PROTOCOL.md)."""
    off = 0
    for _ in range(2):                      # project, id
        off = str_at(p, off)
    n = struct.unpack_from(">I", p, off)[0]; off += 4
    for _ in range(n):                      # globs
        off = str_at(p, off)
    n = struct.unpack_from(">I", p, off)[0]; off += 4
    for _ in range(n):                      # have: str, u64, u64, u32
        off = str_at(p, off) + 20
    n = struct.unpack_from(">I", p, off)[0]; off += 4
    for _ in range(n):                      # parts: str, u64 x3, u32
        off = str_at(p, off) + 28
    flags = struct.unpack_from(">I", p, off)[0]; off += 4
    if flags & 1:
        return p                            # the plan round
    off = str_at(p, off)                 # token
    n = struct.unpack_from(">I", p, off)[0]; off += 4
    for _ in range(n):
        p = replace_str(p, off, os.environ["HOSTILE_ART_SIG_PATH"].encode())
        off = str_at(p, off) + 4
    return p


def from_agent(typ, flags, rid, p):
    """Frames the real agent sends: rewritten, then passed on."""
    req = types.get(rid)
    if typ == OK and req in (JOB_START, JOB_STATUS, JOB_STOP):
        if req == JOB_START and "id" in SCEN:
            p = replace_str(p, 0, env_bytes("HOSTILE_ID_HEX"))
        elif req != JOB_START:
            p = rewrite_record(p, 0)
        if req == JOB_STOP and "ctr-name" in SCEN:
            p = rewrite_stop_containers(p)
    elif typ == OK and req == JOB_LIST and struct.unpack_from(">I", p, 0)[0] > 0:
        p = rewrite_record(p, 4)
    elif typ == LOG_END:
        p = rewrite_record(p, 8)
    elif typ == LOG_DATA and "log-bytes" in SCEN:
        off = struct.unpack_from(">Q", p, 0)[0]
        data = p[8:]
        send(b"".join(frame(LOG_DATA, flags, rid, struct.pack(">Q", off + i) + data[i:i + 1])
                      for i in range(len(data))))
        return
    elif typ == DATA and req == ART_PULL and rid not in art_started:
        art_started.add(rid)
        if "art-bytes" in SCEN and p[:4] == b"GRA1":
            files = int(os.environ.get("HOSTILE_ART_FILES", struct.unpack_from(">I", p, 4)[0]))
            p = b"GRA1" + struct.pack(">IQ", files, int(os.environ["HOSTILE_ART_BYTES"])) + p[16:]
    send(frame(typ, flags, rid, p))


# Set once the real agent's first frame (its unasked HELLO) is passed on:
# what this proxy answers itself must come after it, as from the agent.
hello_passed = threading.Event()


def pump_up(agent):
    while True:
        f = read_frame(agent.stdout)
        if f is None:
            break
        from_agent(*f)
        hello_passed.set()
    hello_passed.set()


def hold():
    """slow: a busy agent's silence, KEEPALIVE every second."""
    for _ in range(int(os.environ.get("HOSTILE_SLOW_S", "5"))):
        send(frame(KEEPALIVE, 0, 0, b""))
        time.sleep(1)


def main():
    # The requests in the command line are taken out and handled as if
    # they had come first on stdin: the lies apply to them too.
    args, early = sys.argv[1:], b""
    if "mute-start" in SCEN or "mute-hello" in SCEN:
        if "mute-hello" in SCEN:
            send(b"GPURUN-AGENT %s\n" % os.path.basename(sys.argv[0]).split("-")[1].encode())
        sys.stdin.buffer.read()  # until gpurun hangs up
        return
    if len(args) > 1:
        early, args = bytes.fromhex(args[1]), args[:1]
    agent = subprocess.Popen([os.environ["HOSTILE_REAL_AGENT"]] + args,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # Its greeting line, as the bootstrap expects it.
    while True:
        line = agent.stdout.readline()
        if not line:
            sys.exit(1)
        if line.startswith(b"GPURUN-AGENT "):
            send(line)
            break
    up = threading.Thread(target=pump_up, args=(agent,), daemon=True)
    up.start()
    hello_passed.wait(30)
    flooded = False
    src = EarlyThenStdin(early)
    while True:
        f = read_frame(src)
        if f is None:
            break
        typ, flags, rid, p = f
        if typ >= 0x06 and typ != DATA:
            types[rid] = typ
        if typ == JOB_LIST and "count" in SCEN:
            send(frame(OK, 1, rid, struct.pack(">I", 0xFFFFFFFF) + b"x" * 100))
            continue
        if typ == JOB_GPUS and "gpu-count" in SCEN:
            # nvidia-smi found, no error, then the lie
            send(frame(OK, 1, rid, b"\x01" + struct.pack(">II", 0, 0xFFFFFFFF) + b"x" * 100))
            continue
        if typ == CONTAINER_CHECK and "ctr-check" in SCEN:
            send(frame(OK, 1, rid, ctr_check_answer()))
            continue
        if typ == JOB_STATUS and "bigframe" in SCEN:
            send(HDR.pack(0xFFFFFFFF, OK, 1, rid))
            continue
        if typ == JOB_STATUS and "flood" in SCEN and not flooded:
            flooded = True
            chunk = frame(DATA, 0, 0x7FFFFFF0, b"\0" * (4 << 20))
            for _ in range(int(os.environ.get("HOSTILE_FLOOD_MB", "300")) // 4):
                send(chunk)
        if typ == ART_PULL and "art-sig" in SCEN:
            p = rewrite_art_sigs(p)
        if "mute" in SCEN:
            continue
        if "slow" in SCEN:
            hold()
        if typ == JOB_START and "slow-start" in SCEN:
            if os.environ.get("HOSTILE_MARK"):
                open(os.environ["HOSTILE_MARK"], "w").close()
            hold()
        agent.stdin.write(frame(typ, flags, rid, p))
        agent.stdin.flush()
    try:
        agent.stdin.close()
    except OSError:
        pass
    up.join(timeout=30)
    agent.wait()


if __name__ == "__main__":
    main()
