#!/bin/bash
# The user config (~/.config/gpurun/config, or $XDG_CONFIG_HOME's) below
# the project's gpurun.ini, with origins in `gpurun config`; [pools];
# `gpurun init` leaving the user's values out; and on the host: the
# agent's XDG_CACHE_HOME and [remote] jobs_dir for job folders, used by
# train, status, logs, pull and rm alike, and refused when another account
# could change it.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj RH=$TRASH/gpuhost-home HC=$TRASH/gpuhost-home/xdg-cache
# The host's sessions get XDG_CACHE_HOME (sshd's SetEnv, as a site would);
# below the home: the boot script refuses a cache below /tmp (others can
# write /tmp, sticky or not).
start_sshd gpuhost "SetEnv HOME=$RH XDG_CACHE_HOME=$HC" || exit 1
trust_sshd gpuhost
unset XDG_CONFIG_HOME XDG_CACHE_HOME
UC=$HOME/.config/gpurun/config
mkdir -p "$HOME/.config/gpurun" "$P"
cat >"$UC" <<'EOF'
# my defaults
[remote]
host = gpuhost
[train]
stop_grace = 3
command = echo from-user
[pools]
lab = gpuhost local
EOF
cat >"$P/gpurun.ini" <<'EOF'
[remote]
path = proj
[build]
command =
[train]
command = echo from-project; echo ckpt >out.txt
[artifacts]
pull = out.txt
EOF

test_expect_success 'gpurun config: values and origins from the user config and the project' '
	cd "$P" && "$GPURUN" config >out &&
	test_grep "^# user config ~/.config/gpurun/config$" out &&
	test_grep -E "^remote.host +gpuhost +~/.config/gpurun/config:3$" out &&
	test_grep -E "^train.stop_grace +3 +~/.config/gpurun/config:5$" out &&
	test_grep -E "^train.command +echo from-project.* +gpurun.ini:6$" out &&
	test_grep -E "^pools.lab +gpuhost local +~/.config/gpurun/config:8$" out &&
	"$GPURUN" config --json >js &&
	test_grep "\"remote.host\": {\"value\": \"gpuhost\", \"origin\": \"~/.config/gpurun/config:3\"}" js &&
	test_grep "\"user_file\": \"$UC\"" js &&
	"$GPURUN" -v config train.stop_grace >v 2>e && test_grep -x 3 v &&
	test_grep "(from ~/.config/gpurun/config:5)" e
'

test_expect_success 'XDG_CONFIG_HOME (absolute) moves it; a relative one is ignored' '
	cd "$P" && mkdir -p "$TRASH/xdg/gpurun" &&
	printf "[train]\nstop_grace = 9\n" >"$TRASH/xdg/gpurun/config" &&
	XDG_CONFIG_HOME=$TRASH/xdg "$GPURUN" config train.stop_grace >v && test_grep -x 9 v &&
	XDG_CONFIG_HOME=xdg "$GPURUN" config train.stop_grace >v && test_grep -x 3 v
'

test_expect_success 'a broken user config names its file and line; a missing one is fine' '
	cd "$P" && cp "$UC" "$TRASH/uc.bak" &&
	printf "[train]\nstop_grase = 1\n" >"$UC" &&
	! "$GPURUN" config >out 2>err &&
	test_grep "~/.config/gpurun/config:2: unknown key .stop_grase. in \[train\]" err &&
	test_grep "did you mean .stop_grace.?" err &&
	printf "[remote]\npath = ~/shared\n" >"$UC" && ! "$GPURUN" config >out 2>err &&
	test_grep "belongs in that project.s gpurun.ini" err &&
	rm "$UC" && "$GPURUN" config train.stop_grace >v && test_grep -x 10 v &&
	cp "$TRASH/uc.bak" "$UC"
'

test_expect_success 'host lists and pools: --host and -o take them; slurm takes one host' '
	cd "$P" && "$GPURUN" --host lab config --json >js &&
	test_grep "\"lab\": {\"value\": \[\"gpuhost\", \"local\"\]" js &&
	! "$GPURUN" --host "gpuhost gpuhost" config 2>err && test_grep "listed twice" err &&
	! "$GPURUN" --host lab -o remote.scheduler=slurm config 2>err &&
	test_grep "a Slurm cluster is reached through one login host" err
'

test_expect_success 'gpurun init writes no value of the user config' '
	mkdir -p "$TRASH/fresh" && cd "$TRASH/fresh" && "$GPURUN" init >/dev/null 2>&1 &&
	! grep -q "from-user\|^host = gpuhost\|stop_grace = 3" gpurun.ini
'

test_expect_success 'train on the user config host: the job folder follows the host XDG_CACHE_HOME' '
	cd "$P" && "$GPURUN" train >out 2>err && test_grep -x from-project out &&
	id=$(head -n1 .gpurun/jobs | cut -f1) &&
	test -d "$(echo "$HC"/gpurun/jobs/proj-*/"$id")" &&
	! test -e "$RH/.cache/gpurun/jobs"
'

J=$TRASH/scratch/jobs
test_expect_success '[remote] jobs_dir: train, status, logs, pull and rm use it' '
	cd "$P" && printf "[remote]\njobs_dir = $J\n" >>"$UC" &&
	"$GPURUN" train >out 2>err && test_grep -x from-project out &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && jd=$(echo "$J"/proj-*/"$id") &&
	test -d "$jd" && test -f "$jd/out.txt" &&
	test "$(stat -c %a "$J")" = 700 &&
	"$GPURUN" status "$id" >st && test_grep "exited with status 0" st &&
	"$GPURUN" logs "$id" >lg && test_grep -x from-project lg &&
	rm -rf "runs/$id" && "$GPURUN" pull "$id" >/dev/null 2>&1 && test_grep -x ckpt "runs/$id/out.txt" &&
	"$GPURUN" status --all >all && test $(grep -c " done " all) = 1 &&
	"$GPURUN" rm "$id" >/dev/null 2>&1 && ! test -e "$jd" &&
	"$GPURUN" -o remote.jobs_dir=~/jobs2 train >/dev/null 2>&1 &&
	id=$(head -n1 .gpurun/jobs | cut -f1) && test -d "$(echo "$RH"/jobs2/proj-*/"$id")"
'

test_expect_success 'a jobs_dir others can change, or a relative one, is refused' '
	cd "$P" && mkdir -p "$TRASH/open" && chmod 777 "$TRASH/open" &&
	! "$GPURUN" -o remote.jobs_dir="$TRASH/open/jobs" status 2>err &&
	test_grep "writable by" err && test_grep "jobs_dir" err && ! test -e "$TRASH/open/jobs" &&
	! "$GPURUN" -o remote.jobs_dir=scratch/jobs status 2>err &&
	test_grep "must be absolute" err
'

test_done
