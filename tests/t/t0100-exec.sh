#!/bin/bash
# gpurun exec over the local transport and over an ssh subprocess to a
# real sshd: stdout/stderr kept apart, exit status passed through, the
# agent uploaded once and reused.
. "$(dirname "$0")/../lib.sh"

write_ini "$TRASH/local" local local "$TRASH/rproj"
mkdir -p "$TRASH/rproj"

test_expect_success 'local: stdout and stderr stay separate' '
	cd local && "$GPURUN" exec -- sh -c "echo to-out; echo to-err >&2" >out 2>err &&
	test_grep -x to-out out && test_grep -x to-err err &&
	! grep to-err out && ! grep to-out err
'

test_expect_success 'local: exit status passes through (0, 7, 137)' '
	cd local &&
	test_expect_code 0 "$GPURUN" exec -- true &&
	test_expect_code 7 "$GPURUN" exec -- sh -c "exit 7" &&
	test_expect_code 137 "$GPURUN" exec -- sh -c "kill -9 \$\$"
'

test_expect_success 'local: runs in the remote project folder, stdin forwarded' '
	cd local && "$GPURUN" exec pwd >out && test_grep -x "$TRASH/rproj" out &&
	printf "a\nb\n" | "$GPURUN" exec -- wc -l >out && test_grep -x 2 out
'

test_expect_success 'local: a missing program exits 127 like a shell, with the reason' '
	cd local && test_expect_code 127 "$GPURUN" exec -- no-such-program 2>err &&
	test_grep "cannot run .no-such-program.: No such file or directory" err
'

test_expect_success 'local: a missing remote folder is a clear error' '
	write_ini "$TRASH/nofolder" local local "$TRASH/does-not-exist" &&
	cd nofolder && test_expect_code 251 "$GPURUN" exec true 2>err &&
	test_grep "does not exist" err
'

test_expect_success 'local: the agent is uploaded once, then reused' '
	rm -rf "$HOME/.cache/gpurun" && cd local &&
	"$GPURUN" -v exec true 2>err1 && test_grep "uploading agent" err1 &&
	"$GPURUN" -v exec true 2>err2 && ! grep "uploading agent" err2 &&
	test $(ls "$HOME/.cache/gpurun" | wc -l) = 1
'

# frames_hex TYPE:ID...: request frames (empty payloads) in hex, as the
# bootstrap command carries them. read_frames: "type id" per frame of the
# agent's output (after its ready line).
frames_hex() {
	python3 -c 'import struct,sys; print(b"".join(struct.pack(">IHHI",0,int(t,0),0,int(i)) for t,i in (a.split(":") for a in sys.argv[1:])).hex())' "$@"
}
read_frames() {
	python3 -c 'import struct,sys
d=sys.stdin.buffer.read(); d=d[d.index(b"\n")+1:]
while len(d)>=12:
    n,t,f,i=struct.unpack(">IHHI",d[:12]); print(t,i); d=d[12+n:]'
}

test_expect_success 'the agent takes requests from its command line, before stdin' '
	"$BUILD/gpurun-agent" serve "$(frames_hex 0x06:7 0x06:8)" </dev/null >out &&
	read_frames <out >frames && printf "1 0\n2 7\n2 8\n" >want && test_cmp want frames
'

test_expect_success 'bad hex on the command line is an error, and stdin is still read' '
	frames_hex 0x06:9 | python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read().strip()))" >req &&
	"$BUILD/gpurun-agent" serve "zz$(frames_hex 0x06:7)" <req >out &&
	read_frames <out >frames && printf "1 0\n3 0\n2 9\n" >want && test_cmp want frames
'

test_expect_success 'openssh: start a real sshd on loopback' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	write_ini "$TRASH/viassh" gpuhost openssh rproj && mkdir -p "$TRASH/gpuhost-home/rproj"
'

test_expect_success 'openssh: exec through ssh, status and streams' '
	cd viassh && "$GPURUN" exec -- sh -c "echo o; echo e >&2; exit 3" >out 2>err;
	test $? = 3 && test_grep -x o out && test_grep -x e err &&
	"$GPURUN" exec pwd >out && test_grep -x "$TRASH/gpuhost-home/rproj" out
'

test_expect_success 'openssh: a login banner on stdout does not confuse the bootstrap' '
	printf "echo Welcome to the GPU box\n" > "$TRASH/gpuhost-home/.profile" &&
	printf "echo noisy bashrc\n" > "$TRASH/gpuhost-home/.bashrc" &&
	cd viassh && "$GPURUN" exec echo fine >out && test_grep -x fine out
'

test_done
