#!/bin/bash
# The man page: cli/cmd/gpurun.1 is exactly what `gpurun __man` prints (made
# from the tables help comes from), groff renders it without a warning,
# it covers every command and flag 'gpurun help' lists, and make install
# puts it where man finds it.
. "$(dirname "$0")/../lib.sh"

test_expect_success 'cli/cmd/gpurun.1 is what gpurun __man prints (make man regenerates it)' '
	"$GPURUN" __man >man.1 && test_cmp "$TOP/cli/cmd/gpurun.1" man.1
'

if command -v groff >/dev/null; then
	test_expect_success 'groff renders it without warnings' '
		groff -man -ww -z -Tutf8 "$TOP/cli/cmd/gpurun.1" 2>err; rc=$?;
		cat err; test $rc = 0 && ! test -s err
	'
else
	test_skip 'groff renders it without warnings' 'groff is not installed'
fi

test_expect_success 'every command, and every flag of its --help, is in it' '
	MANWIDTH=200 man -l "$TOP/cli/cmd/gpurun.1" 2>/dev/null | col -b >page 2>/dev/null ||
		groff -man -Tutf8 "$TOP/cli/cmd/gpurun.1" | col -b >page &&
	"$GPURUN" help | awk "/^commands:\$/ { on = 1; next } on && /^\$/ { exit } on { print \$1 }" >cmds &&
	test -s cmds && ok=1 &&
	while read -r c; do
		grep -q "^   gpurun $c " page || { say "no section for $c"; ok=0; }
		"$GPURUN" help "$c" | awk "/^options:\$/ { on = 1; next } on && /^\$/ { exit }
			on { for (i = 1; i <= NF; i++) if (\$i ~ /^-/) { sub(/,\$/, \"\", \$i); print \$i } }" >flags
		while read -r f; do
			grep -q -- "$f" page || { say "no $f for $c"; ok=0; }
		done <flags
	done <cmds
	test $ok = 1
'

case $(basename "$BUILD") in
build-san) SANV=1 ;;
*) SANV= ;;
esac
if command -v man >/dev/null; then
	test_expect_success 'make install puts it where man finds it' '
		make -s -C "$TOP" SAN=$SANV O="$BUILD" install DESTDIR="$TRASH/inst" PREFIX=/usr >make.out 2>&1 ||
			{ cat make.out; false; } &&
		test -f "$TRASH/inst/usr/share/man/man1/gpurun.1" &&
		MANPATH="$TRASH/inst/usr/share/man" MANWIDTH=100 man gpurun 2>/dev/null | col -b >page &&
		test_grep "gpurun forward \[OPTIONS\] PORT\[:HOSTPORT\]" page
	'
else
	test_skip 'make install puts it where man finds it' 'man is not installed'
fi

test_done
