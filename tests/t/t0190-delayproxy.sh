#!/bin/bash
# The WAN emulator the other tests and the benchmarks rely on: it delays,
# counts, cuts and refuses as asked.
. "$(dirname "$0")/../lib.sh"

test_expect_success 'proxy forwards through to sshd with the added delay' '
	start_sshd gpuhost && start_proxy wan "$SSHD_PORT_gpuhost" 50 &&
	ssh_host_via slowhost gpuhost "$PROXY_PORT_wan" &&
	start=$(date +%s%N) &&
	ssh -F "$HOME/.ssh/config" -o BatchMode=yes slowhost true &&
	elapsed=$(( ($(date +%s%N) - start) / 1000000 )) &&
	say "ssh through a 100 ms RTT proxy took ${elapsed} ms" &&
	test "$elapsed" -ge 300 &&
	test "$(proxy_bytes wan)" -gt 1000
'

test_expect_success 'proxy_cut drops a live connection' '
	(ssh -F "$HOME/.ssh/config" -o BatchMode=yes slowhost sleep 30; echo $? >rc) &
	bg=$! && sleep 1.5 && proxy_cut wan && wait $bg &&
	test "$(cat rc)" = 255
'

test_expect_success 'proxy_down refuses, proxy_up accepts again' '
	proxy_down wan &&
	! ssh -F "$HOME/.ssh/config" -o BatchMode=yes -o ConnectTimeout=5 slowhost true &&
	proxy_up wan &&
	ssh -F "$HOME/.ssh/config" -o BatchMode=yes slowhost true
'

# A cut sent while no connection was open used to be acted on only after
# the wait it fell before: the next connection, accepted in that wait, was
# cut before its banner (the sync model's "Failed getting banner" after a
# cut fault). The pause widens that window so the old proxy fails each time.
test_expect_success 'a cut with no connection open leaves the next connection alone' '
	export DELAYPROXY_IDLE_PAUSE_MS=300 &&
	start_proxy idle "$SSHD_PORT_gpuhost" 0 &&
	unset DELAYPROXY_IDLE_PAUSE_MS &&
	ssh_host_via idlehost gpuhost "$PROXY_PORT_idle" &&
	for i in 1 2 3; do
		sleep 0.5 &&
		kill -USR1 "$PROXY_PID_idle" &&
		ssh -F "$HOME/.ssh/config" -o BatchMode=yes idlehost echo ok-$i >out &&
		test "$(cat out)" = ok-$i || return 1
	done
'

test_done
