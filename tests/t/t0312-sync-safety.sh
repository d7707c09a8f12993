#!/bin/bash
# What sync must never do: write into /, ~ or a system folder (gpurun
# refuses, and the agent refuses again after resolving symlinks), delete or
# write outside the project folder or through a symlink on the host, or
# follow a symlink it carries. The agent is the last line of defence, so
# part of this talks to it directly with hand-made frames.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
R=$TRASH/remote
AGENT=$BUILD/gpurun-agent

refused() {
	write_ini "$P" local local "$1" &&
	(cd "$P" && test_expect_code 253 "$GPURUN" sync 2>"$TRASH/err") &&
	test_grep "refusing to sync into" "$TRASH/err"
}

test_expect_success 'gpurun refuses /, ~, ., $HOME, system folders before connecting' '
	mkdir -p "$P" && echo x >"$P/f" &&
	refused / && refused "~" && refused "~/" && refused "~/.." && refused . &&
	refused "\$HOME" && refused /etc && refused /usr/local/src/proj &&
	refused /var/lib/proj && refused /tmp && refused "/home/../etc" &&
	! test -e /usr/local/src/proj && ! test -e /var/lib/proj
'

test_expect_success 'the agent refuses them again after resolving symlinks' '
	ln -s / "$TRASH/rootlink" && refused "$TRASH/rootlink" &&
	ln -s "$HOME" "$TRASH/homelink" && refused "$TRASH/homelink" &&
	refused "$HOME" && test_grep "home folder" "$TRASH/err" &&
	ln -s /etc "$TRASH/etclink" && refused "$TRASH/etclink/sub"
'

test_expect_success 'symlinks are carried as links, never followed' '
	write_ini "$P" local local "$R" &&
	ln -s ../../../etc/passwd "$P/escape" && ln -s /etc "$P/etcdir" &&
	(cd "$P" && "$GPURUN" -q sync) &&
	test "$(readlink "$R/escape")" = ../../../etc/passwd &&
	test "$(readlink "$R/etcdir")" = /etc && test -L "$R/etcdir"
'

test_expect_success 'a folder replaced by a symlink on the host is replaced, never written through' '
	mkdir -p "$P/sub" "$TRASH/outside" && echo a >"$P/sub/a" && echo b >"$P/sub/b" &&
	(cd "$P" && "$GPURUN" -q sync) &&
	echo victim-a >"$TRASH/outside/a" && echo victim-b >"$TRASH/outside/b" &&
	rm -r "$R/sub" && ln -s "$TRASH/outside" "$R/sub" &&
	rm "$P/sub/a" && echo b2 >"$P/sub/b" &&
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") &&
	test "$(grep -c sub "$TRASH/err")" = 1 && test_grep "symlink" "$TRASH/err" &&
	test "$(cat "$TRASH/outside/a")" = victim-a && test "$(cat "$TRASH/outside/b")" = victim-b &&
	! test -L "$R/sub" && test -d "$R/sub" && test "$(cat "$R/sub/b")" = b2 && ! test -e "$R/sub/a"
'

# agent_session: run the agent with hand-made frames (python builds them
# from the commands in $TRASH/script) and print "ID TYPE [message]" for
# each answer. Frames: u32 len, u16 type, u16 flags, u32 id, payload.
agent_session() {
	python3 - "$AGENT" "$@" <<'PY'
import os, struct, subprocess, sys, tarfile, io
agent, root = sys.argv[1], sys.argv[2]
def s(b): b = b if isinstance(b, bytes) else b.encode(); return struct.pack('>I', len(b)) + b
def frame(t, i, p=b'', flags=0): return struct.pack('>IHHI', len(p), t, flags, i) + p
def tar_zst(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as t:
        for name, data in entries:
            ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
    return subprocess.run(['zstd', '-q', '-c'], input=buf.getvalue(), capture_output=True).stdout
out = frame(1, 1, struct.pack('>I', 1))                                      # HELLO
out += frame(0x20, 2, s(root) + struct.pack('>I', 0) + s(b'') + s(b'\0' * 32))  # OPEN
for line in open(os.environ['SCRIPT'], 'rb').read().decode().splitlines():
    kind, arg = line.split(' ', 1)
    if kind == 'delete':
        out += frame(0x22, 2, struct.pack('>I', 1) + b'\x01' + s(arg))
    elif kind == 'mkdir':
        out += frame(0x22, 2, struct.pack('>I', 1) + b'\x02' + s(arg))
    elif kind == 'tar':
        out += frame(0x23, 10, struct.pack('>I', 2))
        out += frame(4, 10, tar_zst([(arg, b'evil\n')]), flags=1)
    elif kind == 'sig':
        out += frame(0x25, 11, struct.pack('>I', 2) + s(arg))
out += frame(0x26, 2, s(b'\0' * 32))                                        # COMMIT
p = subprocess.run([agent, 'serve'], input=out, capture_output=True)
data = p.stdout[p.stdout.index(b'\n') + 1:]
while len(data) >= 12:
    n, t, fl, i = struct.unpack('>IHHI', data[:12]); pl = data[12:12 + n]; data = data[12 + n:]
    msg = pl[8:] if t == 3 else pl if t == 2 else b''
    msg = msg.decode(errors='replace').replace('\0', ' ')
    print(i, hex(t), msg)
PY
}

test_expect_success 'the agent refuses paths that leave the folder, whatever the client says' '
	mkdir -p "$TRASH/ar/inner" "$TRASH/victim" && echo keep >"$TRASH/victim/v" &&
	echo keep >"$TRASH/ar-sibling" && ln -s "$TRASH/victim" "$TRASH/ar/link" &&
	del_ok=1 &&
	for op in "delete ../ar-sibling" "delete /etc/hostname" "delete inner/../../ar-sibling" \
		"mkdir ../made-outside" "delete .gpurun/sync-lock"; do
		printf "%s\n" "$op" >"$TRASH/script" &&
		SCRIPT=$TRASH/script agent_session "$TRASH/ar" >"$TRASH/replies" &&
		test_grep "^2 0x3 .*SYNC_OPS" "$TRASH/replies" || del_ok=0
	done && test $del_ok = 1 &&
	printf "delete link/v\n" >"$TRASH/script" &&
	SCRIPT=$TRASH/script agent_session "$TRASH/ar" >"$TRASH/replies" &&
	cat "$TRASH/replies" && test_grep "^2 0x2" "$TRASH/replies" &&
	test -f "$TRASH/ar-sibling" && test -f "$TRASH/victim/v" && test -L "$TRASH/ar/link" &&
	! test -e "$TRASH/made-outside"
'

test_expect_success 'the agent refuses tar entries that leave the folder or go through a symlink' '
	bad_ok=1 &&
	for bad in ../evil /tmp/evil-abs .gpurun/sync-manifest; do
		printf "tar %s\n" "$bad" >"$TRASH/script" &&
		SCRIPT=$TRASH/script agent_session "$TRASH/ar" >"$TRASH/replies" &&
		cat "$TRASH/replies" && test_grep "^10 0x3 refusing tar entry" "$TRASH/replies" || bad_ok=0
	done && test $bad_ok = 1 &&
	printf "tar link/evil\n" >"$TRASH/script" &&
	SCRIPT=$TRASH/script agent_session "$TRASH/ar" >"$TRASH/replies" &&
	test_grep "^2 0x2 .*link/evil.*cannot create" "$TRASH/replies" &&
	! test -e "$TRASH/evil" && ! test -e /tmp/evil-abs && ! test -e "$TRASH/victim/evil" &&
	test "$(cat "$TRASH/victim/v")" = keep
'

test_expect_success 'the agent does not read through a symlink for a signature' '
	printf "sig link/v\n" >"$TRASH/script" &&
	SCRIPT=$TRASH/script agent_session "$TRASH/ar" >"$TRASH/replies" &&
	test_grep "^11 0x3" "$TRASH/replies"
'

test_done
