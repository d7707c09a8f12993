#!/bin/bash
# An interrupted sync leaves every file on the host either its old or its
# new version, never a mix or a partial file, and the next sync finishes
# the job: gpurun killed with SIGKILL, the agent killed with SIGKILL (its
# temp files are cleaned by the next session), and the connection cut by
# the delay proxy in the middle of a rate-limited transfer (over both ssh
# transports).
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj

# make_files DIR: 30 files of 1 MB and 100 small ones, all random.
make_files() {
	mkdir -p "$1/big" "$1/small" &&
	for i in $(seq 1 30); do head -c 1000000 /dev/urandom >"$1/big/f$i" || return 1; done &&
	for i in $(seq 1 100); do head -c $((i * 37)) /dev/urandom >"$1/small/s$i" || return 1; done
}

# every_file_old_or_new REMOTE: each entry the host has now is exactly as
# it was before ($TRASH/old.sig) or as it is here ($TRASH/new.sig).
every_file_old_or_new() {
	tree_sig "$1" >"$TRASH/now.sig" &&
	if grep -vxF -f "$TRASH/old.sig" -f "$TRASH/new.sig" "$TRASH/now.sig" >"$TRASH/bad"; then
		say "entries that are neither the old nor the new version:"; cat "$TRASH/bad" >&2
		return 1
	fi
}

no_temp_files() {
	! find "$1" -name '.gpurun-tmp-*' | grep -q .
}

# wait_for_temp REMOTE: until a temp file shows the transfer is under way.
wait_for_temp() {
	for _i in $(seq 1 2000); do
		find "$1" -name '.gpurun-tmp-*' 2>/dev/null | grep -q . && return 0
		sleep 0.01
	done
	say "no temp file appeared under $1"
	return 1
}

rewrite_all() {
	for f in "$P"/big/* "$P"/small/*; do head -c "$(stat -c %s "$f")" /dev/urandom >"$f" || return 1; done &&
	echo new >"$P/added"
}

# Each case is a function: background jobs and their checks read better
# as statements than as one && chain.
kill_client() {
	R=$TRASH/remote-a
	make_files "$P" && write_ini "$P" local local "$R" || return 1
	(cd "$P" && "$GPURUN" -q sync) && tree_sig "$R" >"$TRASH/old.sig" || return 1
	rewrite_all && tree_sig "$P" >"$TRASH/new.sig" || return 1
	(cd "$P" && exec "$GPURUN" -q sync) &
	pid=$!
	wait_for_temp "$R" || return 1
	kill -9 $pid
	wait $pid
	sleep 0.5
	every_file_old_or_new "$R" && no_temp_files "$R" || return 1
	# it was interrupted: not everything is new yet
	! cmp -s "$TRASH/now.sig" "$TRASH/new.sig" || return 1
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") || return 1
	tree_sig "$R" >"$TRASH/now.sig" && test_cmp "$TRASH/new.sig" "$TRASH/now.sig"
}

kill_agent() {
	R=$TRASH/remote-a
	tree_sig "$R" >"$TRASH/old.sig" && rewrite_all && tree_sig "$P" >"$TRASH/new.sig" || return 1
	(cd "$P" && exec "$GPURUN" -q sync) &
	pid=$!
	wait_for_temp "$R" || return 1
	agent=$(pgrep -P $pid | head -1)
	test -n "$agent" || return 1
	kill -9 "$agent"
	wait $pid && return 1 # gpurun must fail
	# the agent could not clean up: its temp files and journal are there
	find "$R" -name ".gpurun-tmp-*" | grep -q . && test -s "$R/.gpurun/sync-journal" || return 1
	tree_sig "$R" | grep -v "gpurun-tmp-" >"$TRASH/now.sig"
	if grep -vxF -f "$TRASH/old.sig" -f "$TRASH/new.sig" "$TRASH/now.sig"; then return 1; fi
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") || return 1
	no_temp_files "$R" && ! test -e "$R/.gpurun/sync-journal" || return 1
	tree_sig "$R" >"$TRASH/now.sig" && test_cmp "$TRASH/new.sig" "$TRASH/now.sig"
}

# A first sync into an empty folder builds each new folder under a temp
# name and renames it into place at COMMIT: until then the host shows
# none of the project. first_sync_killed WHO: kill -9 gpurun (client) or
# the agent (agent) mid-way; nothing but temp names may show, the agent
# (or the next session, from its journal) removes them, and the next
# sync converges.
first_sync_killed() {
	R=$TRASH/remote-$1
	mkdir -p "$R" && tree_sig "$R" >"$TRASH/old.sig" && write_ini "$P" local local "$R" &&
	tree_sig "$P" >"$TRASH/new.sig" || return 1
	(cd "$P" && exec "$GPURUN" -q sync) &
	pid=$!
	wait_for_temp "$R" || return 1
	if [ "$1" = agent ]; then
		agent=$(pgrep -P $pid | head -1)
		test -n "$agent" || return 1
		kill -9 "$agent"
		wait $pid && return 1 # gpurun must fail
		# what the agent staged is there, under temp names only
		find "$R" -name ".gpurun-tmp-d*" -type d | grep -q . || return 1
	else
		kill -9 $pid
		wait $pid
		sleep 0.5
		no_temp_files "$R" || return 1
	fi
	tree_sig "$R" | grep -v "gpurun-tmp-" >"$TRASH/now.sig"
	test_cmp "$TRASH/old.sig" "$TRASH/now.sig" || return 1
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") || return 1
	no_temp_files "$R" && ! test -e "$R/.gpurun/sync-journal" || return 1
	tree_sig "$R" >"$TRASH/now.sig" && test_cmp "$TRASH/new.sig" "$TRASH/now.sig"
}

cut_connection() {
	R=$TRASH/gpuhost-home/proj
	tree_sig "$R" >"$TRASH/old.sig" && rewrite_all && tree_sig "$P" >"$TRASH/new.sig" || return 1
	(cd "$P" && exec "$GPURUN" -q sync 2>"$TRASH/cut.err") &
	pid=$!
	wait_for_temp "$R" || return 1
	sleep 0.5
	proxy_cut slow
	wait $pid
	rc=$?
	say "gpurun exited $rc after the cut: $(cat "$TRASH/cut.err")"; cat "$TRASH/cut.err" >&2
	test $rc -ne 0 || return 1
	sleep 1
	every_file_old_or_new "$R" && no_temp_files "$R" || return 1
	! cmp -s "$TRASH/now.sig" "$TRASH/new.sig" || return 1
	(cd "$P" && "$GPURUN" sync 2>"$TRASH/err") || return 1
	tree_sig "$R" >"$TRASH/now.sig" && test_cmp "$TRASH/new.sig" "$TRASH/now.sig"
}

test_expect_success 'kill -9 of gpurun mid-sync: every file old or new; the next sync converges' '
	kill_client
'

test_expect_success 'kill -9 of the agent mid-sync: its temp files go at the next sync' '
	kill_agent
'

test_expect_success 'kill -9 of gpurun mid first sync: the new folders never show; the next sync converges' '
	first_sync_killed client
'

test_expect_success 'kill -9 of the agent mid first sync: its staged folders go at the next sync' '
	first_sync_killed agent
'

test_expect_success 'setup: sshd behind a 10 MB/s proxy' '
	start_sshd gpuhost && trust_sshd gpuhost &&
	start_proxy slow "$SSHD_PORT_gpuhost" 2 10000000 &&
	ssh_host_via viaslow gpuhost "$PROXY_PORT_slow" &&
	write_ini "$P" viaslow openssh proj &&
	(cd "$P" && "$GPURUN" -q sync)
'

test_expect_success 'a connection cut mid-sync (ssh subprocess): every file old or new; the next sync converges' '
	cut_connection
'

test_expect_success 'a connection cut mid-sync (libssh2): every file old or new; the next sync converges' '
	write_ini "$P" viaslow libssh2 proj && cut_connection
'

test_done
