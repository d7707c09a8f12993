#!/bin/bash
# The man pages: cli/cmd/gpurun.1 and gpurun.ini.5 are exactly what
# `gpurun __man` and `gpurun __man 5` print (made from the tables help
# comes from), groff renders them without a warning, gpurun.1 covers every
# command and flag 'gpurun help' lists and points to gpurun.ini(5), which
# holds every config key, and make install puts both where man finds them.
. "$(dirname "$0")/../lib.sh"

test_expect_success 'cli/cmd/gpurun.1 is what gpurun __man prints (make man regenerates it)' '
	"$GPURUN" __man >man.1 && test_cmp "$TOP/cli/cmd/gpurun.1" man.1
'

test_expect_success 'cli/cmd/gpurun.ini.5 is what gpurun __man 5 prints (make man regenerates it)' '
	"$GPURUN" __man 5 >man.5 && test_cmp "$TOP/cli/cmd/gpurun.ini.5" man.5
'

if command -v groff >/dev/null; then
	test_expect_success 'groff renders them without warnings' '
		groff -man -ww -z -Tutf8 "$TOP/cli/cmd/gpurun.1" "$TOP/cli/cmd/gpurun.ini.5" 2>err;
		rc=$?; cat err; test $rc = 0 && ! test -s err
	'
else
	test_skip 'groff renders them without warnings' 'groff is not installed'
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

test_expect_success 'gpurun.1 points to gpurun.ini(5), which has every key, the user config and [pools]' '
	MANWIDTH=200 man -l "$TOP/cli/cmd/gpurun.1" 2>/dev/null | col -b >page1 2>/dev/null ||
		groff -man -Tutf8 "$TOP/cli/cmd/gpurun.1" | col -b >page1 &&
	test_grep "gpurun.ini(5)" page1 && ! grep -q "^[[:space:]]*remote.host[[:space:]]" page1 &&
	MANWIDTH=200 man -l "$TOP/cli/cmd/gpurun.ini.5" 2>/dev/null | col -b >page5 2>/dev/null ||
		groff -man -Tutf8 "$TOP/cli/cmd/gpurun.ini.5" | col -b >page5 &&
	"$GPURUN" help config | awk "/^  [a-z_]+\\.[a-z_]+ / { print \$1 }" >keys &&
	test "$(wc -l <keys)" -gt 40 && ok=1 &&
	while read -r k; do grep -q "^[[:space:]]*$k[[:space:]]" page5 || { say "no $k in gpurun.ini(5)"; ok=0; }; done <keys &&
	test $ok = 1 && test_grep "THE USER CONFIG" page5 && test_grep "^POOLS" page5 &&
	test_grep "^EXAMPLES" page5
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
		test -f "$TRASH/inst/usr/share/man/man5/gpurun.ini.5" &&
		MANPATH="$TRASH/inst/usr/share/man" MANWIDTH=100 man gpurun 2>/dev/null | col -b >page &&
		test_grep "gpurun forward \[OPTIONS\] PORT\[:HOSTPORT\]" page &&
		MANPATH="$TRASH/inst/usr/share/man" MANWIDTH=100 man 5 gpurun.ini 2>/dev/null | col -b >page &&
		test_grep "THE USER CONFIG" page
	'
else
	test_skip 'make install puts it where man finds it' 'man is not installed'
fi

test_done
