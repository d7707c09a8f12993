#!/bin/bash
# The container test harness (tests/container.sh) on its own: each runtime
# comes up isolated under $TRASH, runs a command in the image imported from
# busybox, is reached from an ssh session the way the agent reaches it, and
# is torn down leaving nothing behind. Runtimes that cannot start here are
# skipped with their reason. Prints how long start and import took.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../container.sh"

for rt in podman docker; do
	if why=$(container_missing $rt); then
		test_skip "$rt: runs a command in the imported image" "$why"
		continue
	fi
	if ! container_start $rt; then
		test_skip "$rt: runs a command in the imported image" "$CONTAINER_WHY"
		continue
	fi
	# podman rm -f waits 10 s for a PID 1 that ignores TERM; docker's kills.
	rmnow=
	[ $rt = podman ] && rmnow='-t 0'
	eval "up=\$CONTAINER_START_SECONDS_$rt imp=\$CONTAINER_IMPORT_SECONDS_$rt"
	echo "# $rt: up in ${up}s, image imported in ${imp}s"

	test_expect_success "$rt: runs a command in the imported image, argv intact" "
		ctr $rt run --rm --network host $CONTAINER_IMAGE sh -c 'echo \"\$1|\$2\"; id -u' sh 'a b' '\$HOME;x' >out &&
		printf '%s\n' 'a b|\$HOME;x' 0 >want &&
		test_cmp want out
	"

	test_expect_success "$rt: passes the exit status and the user asked for" "
		test_expect_code 7 ctr $rt run --rm --network host $CONTAINER_IMAGE sh -c 'exit 7' &&
		ctr $rt run --rm --network host --user 1234:1235 $CONTAINER_IMAGE sh -c 'echo \$(id -u):\$(id -g)' >out &&
		echo 1234:1235 >want && test_cmp want out
	"

	test_expect_success "$rt: a bind mount at the same path, written as the caller's uid" "
		mkdir -p $TRASH/$rt-share && chmod 777 $TRASH/$rt-share &&
		ctr $rt run --rm --network host --user 4321:4322 -v $TRASH/$rt-share:$TRASH/$rt-share \
			-w $TRASH/$rt-share $CONTAINER_IMAGE sh -c 'echo made >out.txt' &&
		test \"\$(stat -c %u:%g $TRASH/$rt-share/out.txt)\" = 4321:4322 &&
		test \"\$(cat $TRASH/$rt-share/out.txt)\" = made
	"

	test_expect_success "$rt: only the test's own containers are seen" "
		ctr $rt run -d --name gr-seen-\$\$ --network host $CONTAINER_IMAGE sleep 600 &&
		ctr $rt ps -a --format '{{.Names}}' >names &&
		echo gr-seen-\$\$ >want && test_cmp want names &&
		ctr $rt rm -f $rmnow gr-seen-\$\$ >/dev/null &&
		ctr $rt ps -a -q >left && test_cmp /dev/null left
	"

	test_expect_success "$rt: reached from an ssh session through its environment" "
		start_sshd ${rt}host \"SetEnv HOME=$TRASH/${rt}host-home $(container_env $rt)\" &&
		trust_sshd ${rt}host &&
		ssh -F $HOME/.ssh/config -o BatchMode=yes ${rt}host \
			$rt run --rm --network host $CONTAINER_IMAGE echo from-ssh >out &&
		echo from-ssh >want && test_cmp want out
	"

	test_expect_success "$rt: torn down, nothing is left" '
		ctr $rt run -d --network host $CONTAINER_IMAGE sleep 600 &&
		pid=$(cat $TRASH/$rt/dockerd.bgpid 2>/dev/null || :) &&
		short=$(cat $TRASH/$rt/run*.path) &&
		container_stop $rt &&
		! grep -F -e " $TRASH/$rt/" -e " $short/" /proc/mounts &&
		! test -e "$short" &&
		! pgrep -f "containerd.*$short" &&
		! pgrep -f "conmon.*$short" &&
		if [ $rt = docker ]; then ! kill -0 $pid 2>/dev/null; fi
	'
done

test_done
