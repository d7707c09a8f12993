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

test_done
