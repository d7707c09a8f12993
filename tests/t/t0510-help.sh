#!/bin/bash
# Help and terminal manners: every command's --help works (outside any
# project too) and equals 'gpurun help CMD'; 'gpurun help exit-codes'
# matches the README; usage errors show the synopsis; typos get
# suggestions; colour only on a terminal, never under NO_COLOR.
. "$(dirname "$0")/../lib.sh"
cd "$TRASH" || exit 1

"$GPURUN" help | awk '$0 == "commands:" { on = 1; next } on && /^$/ { exit } on { print $1 }' > commands
write_ini "$TRASH/proj" local local "$TRASH/remote"
mkdir -p "$TRASH/remote"

test_expect_success 'gpurun help lists the commands; -h and --help print it too' '
	test $(wc -l < commands) -ge 10 &&
	test_grep -x init commands && test_grep -x hook commands &&
	"$GPURUN" help > h1 && "$GPURUN" --help > h2 && "$GPURUN" -h > h3 &&
	test_cmp h1 h2 && test_cmp h1 h3 &&
	test_grep "^usage: gpurun \[GLOBAL OPTIONS\] COMMAND" h1 &&
	test_grep "^help topics:" h1
'

test_expect_success 'every command: --help and -h work outside a project and equal gpurun help CMD' '
	mkdir nowhere && cd nowhere &&
	while read cmd; do
		"$GPURUN" $cmd --help > a 2>err || { say "$cmd --help failed"; cat err >&2; exit 1; }
		"$GPURUN" $cmd -h > b && "$GPURUN" help $cmd > c &&
		test_cmp a b && test_cmp a c &&
		head -n 1 a | grep -q "^usage: gpurun $cmd " ||
		{ say "$cmd: bad first line: $(head -n 1 a)"; exit 1; }
		test_grep -e "-h, --help" a > /dev/null || exit 1
	done < ../commands
'

test_expect_success 'help of a command that connects names the [remote] keys' '
	"$GPURUN" sync --help > out &&
	test_grep "\[remote\] keys" out &&
	test_grep "gpurun help config" out
'

test_expect_success 'help config is the config command help plus the key schema' '
	"$GPURUN" help config > a && "$GPURUN" config --help > b && test_cmp a b &&
	test_grep "^config keys" a && test_grep "GPURUN_<SECTION>_<KEY>" a
'

test_expect_success 'gpurun help exit-codes matches the README section' '
	awk "/^## Exit codes/ { on = 1; next } on && /^## / { exit } on && /^    / { print }" \
		"$TOP/README.md" | sed "s/^    //" > readme-codes &&
	"$GPURUN" help exit-codes > codes &&
	test -s codes && test_cmp codes readme-codes
'

test_expect_success 'help environment names what gpurun reads' '
	"$GPURUN" help environment > out &&
	test_grep GPURUN_SKIP_HOOK out && test_grep NO_COLOR out
'

test_expect_success 'an unknown command or topic is a usage error with a suggestion' '
	test_expect_code 252 "$GPURUN" stauts 2>err &&
	test_grep "^gpurun: .stauts. is not a gpurun command" err &&
	test_grep "^hint: did you mean .gpurun status.?" err &&
	test_expect_code 252 "$GPURUN" help exit-code 2>err &&
	test_grep "did you mean .gpurun help exit-codes.?" err &&
	test_expect_code 252 "$GPURUN" xyzzy 2>err &&
	test_grep "^hint: see .gpurun help. for the list" err
'

test_expect_success 'usage errors end with the synopsis' '
	test_expect_code 252 "$GPURUN" hook sideways 2>err &&
	test_grep "^gpurun: unknown hook action .sideways." err &&
	test_grep "^hint: usage: gpurun hook \[OPTIONS\] install|uninstall (see .gpurun hook --help.)" err &&
	test_expect_code 252 "$GPURUN" --bogus 2>err &&
	test_grep "^hint: usage: gpurun \[GLOBAL OPTIONS\] COMMAND" err &&
	test_expect_code 252 "$GPURUN" --color=sometimes help 2>err &&
	test_grep "must be one of auto, always, never" err &&
	test_expect_code 252 "$GPURUN" 2>err && test_grep "^usage: gpurun" err
'

test_expect_success 'global options work after the command too, up to --' '
	"$GPURUN" -C proj config remote.host > a &&
	"$GPURUN" config remote.host -C proj > b && test_cmp a b &&
	"$GPURUN" config -C proj --host elsewhere remote.host > c &&
	test_grep -x elsewhere c &&
	"$GPURUN" config remote.host --host=box2 -C proj > c && test_grep -x box2 c &&
	"$GPURUN" config -C proj -o remote.host=box3 remote.host > c && test_grep -x box3 c &&
	"$GPURUN" hook -v --help > h && test_grep "^usage: gpurun hook" h &&
	"$GPURUN" completion --quiet bash > /dev/null &&
	"$GPURUN" completion bash --color=never > /dev/null &&
	test_expect_code 252 "$GPURUN" status --color=sometimes 2>err &&
	test_grep "must be one of auto, always, never" err &&
	test_expect_code 252 "$GPURUN" config -C proj remote.host --host 2>err &&
	test_grep "option .--host. needs a value" err &&
	test_expect_code 252 "$GPURUN" help -- -v 2>err &&
	test_grep "no help for .-v." err
'

test_expect_success 'version, -V and --version print the same line' '
	"$GPURUN" --version > a && "$GPURUN" -V > b && "$GPURUN" version > c &&
	"$GPURUN" status --version > d &&
	test_cmp a b && test_cmp a c && test_cmp a d &&
	test_grep "^gpurun [0-9][^ ]* (agent [0-9a-f]*, protocol [0-9]*)$" a &&
	test_expect_code 252 "$GPURUN" version extra 2>err &&
	test_grep "version takes no arguments" err
'

test_expect_success '-q with -v is refused, in any order and cluster' '
	for args in "-q -v status" "-qv status" "-vq status" "status -q -v" \
		    "-v status --quiet" "status -vq" "--verbose --quiet help"; do
		test_expect_code 252 "$GPURUN" $args 2>err &&
		test_grep "^gpurun: -q (--quiet) and -v (--verbose) cannot be used together" err ||
		{ say "not refused: $args"; exit 1; }
	done
'

test_expect_success 'usage text says a bad command line exits 252' '
	"$GPURUN" help > h && test_grep "A bad command line exits" h && test_grep "^252 " h &&
	"$GPURUN" status --help > h && tr "\n" " " < h | grep -q "A bad command line exits 252"
'

test_expect_success 'a bad option is a usage error even outside a project' '
	mkdir -p nowhere && cd nowhere &&
	test_expect_code 252 "$GPURUN" logs --bogus 2>err &&
	test_grep "^gpurun: unknown option .--bogus." err &&
	test_grep "^hint: usage: gpurun logs \[OPTIONS\] \[JOB|GROUP\]" err &&
	test_expect_code 252 "$GPURUN" sync -v --bogus 2>err &&
	test_grep "^gpurun: unknown option .--bogus." err
'

test_expect_success 'exec passes --help after its command on to the host' '
	cd proj &&
	"$GPURUN" exec --help > out && test_grep "^usage: gpurun exec" out &&
	"$GPURUN" exec -- sh -c "echo remote-got \$1" sh --help > out &&
	test_grep -x "remote-got --help" out &&
	"$GPURUN" exec sh -c "echo remote-got \$1" sh --help > out &&
	test_grep -x "remote-got --help" out
'

test_expect_success 'exec: global options before its command are gpurun'"'"'s, after it the command'"'"'s' '
	cd proj &&
	"$GPURUN" exec sh -c "echo remote-got \$1 \$2" sh -v --host > out 2>err &&
	test_grep -x "remote-got -v --host" out &&
	"$GPURUN" exec -q --host local sh -c "echo remote-got \$1" sh -q > out &&
	test_grep -x "remote-got -q" out &&
	"$GPURUN" exec --color=never -- sh -c "echo remote-got \$1" sh -V > out &&
	test_grep -x "remote-got -V" out &&
	test_expect_code 252 "$GPURUN" exec -qv sh -c true 2>err &&
	test_grep "cannot be used together" err
'

# Colour: under a pty (script(1)) unless NO_COLOR (non-empty) or TERM=dumb;
# never in a pipe; --color=always|never override.
esc=$(printf '\033')
test_expect_success 'errors: no colour in a pipe, colour with --color=always' '
	test_expect_code 252 "$GPURUN" nosuch 2>err && ! grep -q "$esc" err &&
	(unset NO_COLOR; test_expect_code 252 "$GPURUN" nosuch 2>err) && ! grep -q "$esc" err &&
	test_expect_code 252 "$GPURUN" --color=always nosuch 2>err &&
	grep -q "$esc\[1;31mgpurun:$esc\[m .nosuch." err &&
	grep -q "$esc\[33mhint:" err
'

# on_tty ENV... -- ARGS: run gpurun under a pty (script(1)) with ENV set
# (NO_COLOR unset first), its terminal output in tty-out.
on_tty() {
	_env="env -u NO_COLOR"
	while [ "$1" != -- ]; do _env="$_env $1"; shift; done
	shift
	$_env script -qec "$GPURUN $*" /dev/null > tty-out
	return 0
}
if command -v script >/dev/null; then
	test_expect_success 'errors on a terminal: colour unless NO_COLOR, TERM=dumb or --color=never' '
		on_tty TERM=xterm -- nosuch && grep -q "$esc\[1;31mgpurun:" tty-out &&
		on_tty TERM=xterm NO_COLOR=1 -- nosuch && ! grep -q "$esc\[" tty-out &&
		grep -q "gpurun: .nosuch." tty-out &&
		on_tty TERM=xterm NO_COLOR= -- nosuch && grep -q "$esc\[1;31mgpurun:" tty-out &&
		on_tty TERM=dumb -- nosuch && ! grep -q "$esc\[" tty-out &&
		grep -q "gpurun: .nosuch." tty-out &&
		on_tty TERM=xterm -- --color=never nosuch && ! grep -q "$esc\[" tty-out &&
		on_tty TERM=xterm NO_COLOR=1 -- --color=always nosuch && grep -q "$esc\[1;31mgpurun:" tty-out
	'
else
	test_skip "colour on a terminal" "script(1) is not installed"
fi

test_done
