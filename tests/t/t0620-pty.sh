#!/bin/bash
# exec -t and shell, driven from a real terminal (a pty, tests/helpers/
# ptydrive.py): an interactive python3 on the host answers what is typed,
# follows a window resize, gets Ctrl-C as a KeyboardInterrupt, and the
# terminal's modes are back as they were afterwards; over libssh2 (a real
# sshd on loopback), an ssh subprocess and the local transport. shell is
# the login shell in the project folder, under a pty on a terminal and
# reading stdin without one.
. "$(dirname "$0")/../lib.sh"

DRIVE="python3 $TOP/tests/helpers/ptydrive.py"
R=$TRASH/gpuhost-home/proj
mkdir -p "$R"

test_expect_success 'start sshd; projects for libssh2, openssh and local' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	write_ini "$TRASH/p2" gpuhost libssh2 proj &&
	write_ini "$TRASH/po" gpuhost openssh proj &&
	write_ini "$TRASH/pl" local local "$R"
'

py_session='wait:>>> |send:print(6 * 7)\r|wait:42|resize:33x111|sleep:0.3|send:import os; print(os.get_terminal_size())\r|wait:columns=111, lines=33|send:import time; time.sleep(30)\r|sleep:0.5|send:\x03|wait:KeyboardInterrupt|send:import sys; print(sys.stdin.isatty(), os.getcwd())\r|waitnew:>>> |send:exit(3)\r'

for kind in p2:libssh2 po:openssh pl:local; do
	dir=${kind%%:*} name=${kind#*:}
	test_expect_success "$name: exec -t python3: type, read the answer, resize, Ctrl-C, exit status" '
		cd "$dir" && { $DRIVE --rows 24 --cols 80 "$py_session" -- "$GPURUN" exec -t python3 >out; rc=$?; } &&
		cat out && test $rc = 3 &&
		test_grep "^42" out && test_grep "columns=111, lines=33" out &&
		test_grep "KeyboardInterrupt" out && test_grep "True $R" out &&
		test_grep "ptydrive: modes restored" out
	'
done

test_expect_success 'libssh2: the terminal is raw meanwhile: no local echo, keys go through as typed' '
	cd p2 && $DRIVE "wait:READY|send:abc\x04\x04|sleep:1" -- "$GPURUN" exec -t -- sh -c "stty -echo; echo READY; od -c | head -n 1" >out &&
	cat out && test_grep "a   b   c" out && ! grep -q "^abc" out &&
	test_grep "ptydrive: modes restored" out
'

test_expect_success 'libssh2: TERM and the size reach the host; -t without a terminal warns' '
	cd p2 && TERM=xterm-256color $DRIVE --rows 40 --cols 132 "" -- "$GPURUN" exec -t -- sh -c "echo \$TERM; stty size" >out &&
	test_grep "^xterm-256color" out && test_grep "^40 132" out &&
	"$GPURUN" exec -t -- sh -c "test -t 0 || echo notty" </dev/null >out 2>err &&
	test_grep -x notty out && test_grep "stdin is not a terminal" err &&
	"$GPURUN" exec -tt -- sh -c "test -t 1 && echo tty" </dev/null >out 2>err &&
	test_grep "^tty" out
'

test_expect_success 'libssh2: the terminal is restored when the connection drops mid-session' '
	cd p2 && { $DRIVE "wait:>>> |send:import os, signal; os.kill(os.getppid(), signal.SIGKILL)\r" -- "$GPURUN" exec -t python3 >out; rc=$?; } &&
	cat out && test $rc != 0 && test_grep "ptydrive: modes restored" out
'

for kind in p2:libssh2 po:openssh; do
	dir=${kind%%:*} name=${kind#*:}
	test_expect_success "$name: shell: the login shell in the project folder, under a terminal" '
		printf "echo profile-read\n" >"$TRASH/gpuhost-home/.profile" &&
		cd "$dir" && { SHELL=/bin/sh $DRIVE "wait:profile-read|send:echo I am \$0 in \$(pwd); tty\r|wait:/dev/pts/|send:exit 4\r" -- "$GPURUN" shell >out; rc=$?; } &&
		cat out && test $rc = 4 &&
		test_grep "I am -.* in $R" out && test_grep "ptydrive: modes restored" out
	'
done

test_expect_success 'shell without a terminal reads commands from stdin' '
	cd p2 && printf "pwd\necho \$0\nexit 6\n" | "$GPURUN" shell >out; rc=$?;
	cat out && test $rc = 6 && test_grep -x "$R" out && test_grep "^-" out
'

test_expect_success 'shell takes no arguments (and says what does)' '
	cd p2 && test_expect_code 252 "$GPURUN" shell ls 2>err &&
	test_grep "shell takes no arguments" err && test_grep "gpurun exec -t" err
'

test_done
