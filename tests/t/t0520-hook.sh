#!/bin/bash
# The git pre-push hook with real git, a local bare remote and a real sshd
# (openssh transport): a push syncs and runs [hooks] pre_push on the host, a
# failing check blocks the push and shows the remote output, a hook already
# there still runs first, GPURUN_SKIP_HOOK=1 and --no-verify skip, and
# uninstall puts the old hook back byte for byte.
. "$(dirname "$0")/../lib.sh"
cd "$TRASH" || exit 1

export GIT_AUTHOR_NAME=tester GIT_AUTHOR_EMAIL=t@example.com
export GIT_COMMITTER_NAME=tester GIT_COMMITTER_EMAIL=t@example.com
export GIT_CONFIG_NOSYSTEM=1
RHOME=$TRASH/gpuhost-home

# ini [PRE_PUSH]: work/gpurun.ini for the test sshd, with a smoke test.
ini() {
	write_ini "$TRASH/work" gpuhost openssh proj
	[ -z "${1:-}" ] || printf '[hooks]\npre_push = %s\n' "$1" >> "$TRASH/work/gpurun.ini"
}
# commit_push [GIT PUSH ARGS]: a new commit in work, pushed to origin.
n=0
commit_push() {
	n=$((n + 1))
	echo "change $n" >> "$TRASH/work/file.txt" &&
	git -C "$TRASH/work" add file.txt && git -C "$TRASH/work" commit -q -m "change $n" &&
	(cd "$TRASH/work" && git push "$@" origin main)
}
remote_head() { git -C "$TRASH/remote.git" rev-parse main; }

test_expect_success 'a git work tree, a bare remote, a real sshd' '
	start_sshd gpuhost && trust_sshd gpuhost && mkdir -p "$RHOME/proj" &&
	git init -q --bare remote.git &&
	git init -q -b main work && ini &&
	echo hello > work/file.txt && echo "*.log" > work/.gitignore &&
	git -C work add . && git -C work commit -q -m init &&
	git -C work remote add origin ../remote.git &&
	(cd work && git push -q origin main) && test -n "$(remote_head)"
'

test_expect_success 'install writes an executable pre-push hook' '
	cd work && "$GPURUN" hook install 2>err &&
	test_grep "installed gpurun.s pre-push hook in .\.git/hooks/pre-push." err &&
	test -x .git/hooks/pre-push &&
	test_grep "gpurun pre-push hook" .git/hooks/pre-push &&
	test_grep -F "gpurun=$(realpath "$GPURUN" | sed "s/.*/'"'"'&'"'"'/")" .git/hooks/pre-push &&
	! test -e .git/hooks/pre-push.gpurun-orig
'

test_expect_success 'install twice is refused and leaves the hook alone' '
	cd work && cp .git/hooks/pre-push before &&
	test_expect_code 1 "$GPURUN" hook install 2>err &&
	test_grep "already installed" err && test_grep "hook uninstall" err &&
	test_cmp before .git/hooks/pre-push
'

test_expect_success 'a push syncs to the host over ssh first' '
	rm -rf "$RHOME/.cache/gpurun" &&
	commit_push 2>err &&
	test_grep "gpurun pre-push: syncing to gpuhost:proj" err &&
	test_grep "gpurun pre-push: synced" err &&
	ls "$RHOME"/.cache/gpurun/agent-* &&
	test "$(remote_head)" = "$(git -C work rev-parse main)"
'

if (cd work && "$GPURUN" sync 2>&1) | grep -q "not implemented"; then
	test_skip "the push delivers the project files to the host" \
		"gpurun sync is a placeholder in this branch (sync_project sends nothing)"
else
	test_expect_success 'the push delivers the project files to the host' '
		test_cmp work/file.txt "$RHOME/proj/file.txt"
	'
fi

test_expect_success 'a failing pre_push blocks the push and shows the remote output' '
	ini "echo smoke-out; echo smoke-err >&2; pwd; exit 3" &&
	before=$(remote_head) &&
	! commit_push > out 2>err &&
	cat out err > all &&
	test_grep -x smoke-out all && test_grep -x smoke-err all &&
	test_grep -x "$RHOME/proj" all &&
	test_grep "gpurun pre-push: running on gpuhost: echo smoke-out" err &&
	test_grep "^gpurun: pre-push check failed on .gpuhost. (exit 3)" err &&
	test_grep "^hint: push anyway with GPURUN_SKIP_HOOK=1 git push" err &&
	test "$(remote_head)" = "$before"
'

test_expect_success 'GPURUN_SKIP_HOOK=1 and --no-verify push anyway' '
	GPURUN_SKIP_HOOK=1 commit_push 2>err &&
	test_grep "pre-push hook skipped (GPURUN_SKIP_HOOK is set)" err &&
	! grep smoke err &&
	test "$(remote_head)" = "$(git -C work rev-parse main)" &&
	commit_push --no-verify 2>err &&
	! grep gpurun err &&
	test "$(remote_head)" = "$(git -C work rev-parse main)"
'

test_expect_success 'a passing pre_push lets the push through' '
	ini "test -f file.txt || test -d . && echo smoke-ok" &&
	commit_push >out 2>err &&
	cat out err | test_grep -x smoke-ok &&
	test_grep "gpurun pre-push: check passed" err &&
	test "$(remote_head)" = "$(git -C work rev-parse main)"
'

test_expect_success 'an unreachable host blocks the push with the ssh error' '
	port=$(free_port) &&
	printf "Host deadhost\n\tHostName 127.0.0.1\n\tPort %s\n\n" "$port" >> "$HOME/.ssh/config" &&
	write_ini "$TRASH/work" deadhost openssh proj &&
	before=$(remote_head) &&
	! commit_push 2>err &&
	test_grep "^gpurun: pre-push sync to .deadhost. failed" err &&
	test "$(remote_head)" = "$before" &&
	ini
'

test_expect_success 'a push that only deletes a branch does not sync' '
	(cd work && git push -q --no-verify origin main:topic) &&
	(cd work && git push origin --delete topic) 2>err &&
	! grep "pre-push: sync" err
'

test_expect_success 'uninstall removes the hook; a second uninstall says so' '
	cd work && "$GPURUN" hook uninstall 2>err &&
	test_grep "removed gpurun.s pre-push hook" err &&
	! test -e .git/hooks/pre-push &&
	test_expect_code 1 "$GPURUN" hook uninstall 2>err &&
	test_grep "not installed" err
'

test_expect_success 'a hook already there is chained: it runs first, with the same args and input' '
	cd work &&
	printf "#!/bin/sh\n# the team hook\necho team-hook-ran \"\$@\" >&2\ncat > \"%s/team-stdin\"\n" "$TRASH" \
		> .git/hooks/pre-push &&
	chmod 750 .git/hooks/pre-push &&
	cp -p .git/hooks/pre-push "$TRASH/team-hook" &&
	"$GPURUN" hook install 2>err &&
	test_grep "the hook that was there runs first" err &&
	test_cmp "$TRASH/team-hook" .git/hooks/pre-push.gpurun-orig &&
	cd .. && commit_push 2>err &&
	test_grep -x "team-hook-ran origin ../remote.git" err &&
	test_grep "^refs/heads/main [0-9a-f]* refs/heads/main [0-9a-f]*$" team-stdin &&
	test $(grep -n team-hook-ran err | cut -d: -f1) -lt $(grep -n "syncing to" err | cut -d: -f1)
'

test_expect_success 'a failing chained hook stops the push before gpurun runs' '
	sed -i "s/^cat > .*/exit 9/" work/.git/hooks/pre-push.gpurun-orig &&
	before=$(remote_head) &&
	! commit_push 2>err &&
	test_grep team-hook-ran err && ! grep "syncing to" err &&
	test "$(remote_head)" = "$before" &&
	! GPURUN_SKIP_HOOK=1 commit_push 2>err && test_grep team-hook-ran err &&
	cp -p "$TRASH/team-hook" work/.git/hooks/pre-push.gpurun-orig
'

test_expect_success 'uninstall restores the earlier hook byte for byte, mode included' '
	cd work && "$GPURUN" hook uninstall 2>err &&
	test_grep "is the hook that was there before" err &&
	cmp "$TRASH/team-hook" .git/hooks/pre-push &&
	test "$(stat -c %a .git/hooks/pre-push)" = 750 &&
	! test -e .git/hooks/pre-push.gpurun-orig
'

test_expect_success 'uninstall leaves a hook that is not gpurun.s alone' '
	cd work && test_expect_code 1 "$GPURUN" hook uninstall 2>err &&
	test_grep "is another hook; it was left alone" err &&
	cmp "$TRASH/team-hook" .git/hooks/pre-push && rm .git/hooks/pre-push
'

test_expect_success 'install honours core.hooksPath; -q is quiet' '
	cd work && git config core.hooksPath .githooks &&
	"$GPURUN" -q hook install 2>err && test ! -s err &&
	test -x .githooks/pre-push && ! test -e .git/hooks/pre-push &&
	cd .. && commit_push 2>err && test_grep "synced" err &&
	cd work && "$GPURUN" -q hook uninstall && ! test -e .githooks/pre-push &&
	git config --unset core.hooksPath
'

test_expect_success 'a project in a subfolder, installed without git on PATH' '
	git init -q -b main mono && git -C mono remote add origin ../remote-mono.git &&
	git init -q --bare remote-mono.git &&
	write_ini "$TRASH/mono/ml" gpuhost openssh proj &&
	printf "[hooks]\npre_push = echo from-ml-project\n" >> mono/ml/gpurun.ini &&
	mkdir -p mono/ml/src && echo x > mono/ml/src/x && git -C mono add . &&
	git -C mono commit -q -m init &&
	(cd mono/ml/src && env PATH=/nonexistent "$GPURUN" hook install) &&
	test_grep -F -- "-C '"'"'ml'"'"' hook run" mono/.git/hooks/pre-push &&
	(cd mono && git push origin main) >out 2>err &&
	cat out err | test_grep -x from-ml-project
'

test_expect_success 'install outside a git repository or a project says why' '
	mkdir -p plain && cd plain &&
	test_expect_code 1 "$GPURUN" hook install 2>err &&
	test_grep "not inside a git work tree" err &&
	git init -q . && test_expect_code 1 "$GPURUN" hook install 2>err &&
	test_grep "no gpurun.ini here or in any parent folder" err &&
	test_grep "gpurun init" err && ! test -e .git/hooks/pre-push
'

test_done
