#!/bin/bash
# Every example config in the README and the man pages loads: each code
# block that holds a [section] line is written to a gpurun.ini and read by
# `gpurun config`; one that fails names its file and line. A block that is
# deliberately not a config is marked (<!-- not-a-config --> before it in
# Markdown, .\" not-a-config in roff; tests/doc_examples.py) and such
# blocks stay few.
. "$(dirname "$0")/../lib.sh"

export XDG_CONFIG_HOME=$TRASH/no-user-config # no user config but the blocks

# load_blocks DIR: load each block DIR/list names; print the failures as
# FILE:LINE: gpurun's error. Fails if any block fails.
load_blocks() {
	local n where ok=0
	while read -r n where; do
		if ! "$GPURUN" -c "$1/$n.ini" config >/dev/null 2>"$1/$n.err"; then
			printf '%s: %s\n' "$where" "$(head -n 2 "$1/$n.err" | tr '\n' ' ')"
			ok=1
		fi
	done <"$1/list"
	return $ok
}

for doc in README.md cli/cmd/gpurun.1 cli/cmd/gpurun.ini.5; do
	test_expect_success "every example config in $doc loads" '
		python3 "$TOP/tests/doc_examples.py" "ex-${doc##*/}" "$TOP/$doc" &&
		load_blocks "ex-${doc##*/}" >fails || { cat fails >&2; false; }
	'
done

test_expect_success 'the examples are found (README: 6 or more, gpurun.ini(5): 3 or more), few are marked' '
	test "$(wc -l <ex-README.md/list)" -ge 6 &&
	test "$(wc -l <ex-gpurun.ini.5/list)" -ge 3 &&
	cat ex-*/skipped >skipped && test "$(wc -l <skipped)" -le 4 ||
		{ cat ex-*/list ex-*/skipped >&2; false; }
'

test_expect_success 'the check fails on a broken example, naming its line; a marked one is skipped' '
	printf "%s\n" "# doc" "" "    [remote]" "    host = a b a" "" "text" "" \
		"<!-- not-a-config -->" "\`\`\`" "[remote]" "hots = x" "\`\`\`" "" \
		"\`\`\`ini" "[train]" "gpus = 2   ; two" "\`\`\`" >doc.md &&
	python3 "$TOP/tests/doc_examples.py" ex-doc doc.md &&
	test "$(cat ex-doc/list)" = "1 doc.md:3
2 doc.md:15" && test "$(cat ex-doc/skipped)" = "doc.md:10" &&
	! load_blocks ex-doc >fails && test_grep "^doc.md:3: .*listed twice" fails &&
	test "$(wc -l <fails)" = 1 &&
	printf "%s\n" ".SH EXAMPLES" ".PP" ".nf" "[train]" "command = echo a\\e \\-\\-x   # c" ".fi" \
		".\\\" not-a-config" ".PP" ".nf" "[gpu]" ".fi" >doc.5 &&
	python3 "$TOP/tests/doc_examples.py" ex-roff doc.5 &&
	test "$(cat ex-roff/list)" = "1 doc.5:4" && test "$(cat ex-roff/skipped)" = "doc.5:10" &&
	test_grep -x "command = echo a\\\\ --x   # c" ex-roff/1.ini && load_blocks ex-roff
'

test_done
