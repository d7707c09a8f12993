#!/bin/bash
# Ignore rules as git applies them, checked against git itself: a
# hand-written tricky tree, generated trees, `--why` against
# `git check-ignore -v`, tracked files, the scan without git on PATH, and
# gpurun's own layers (.gpurunignore, [sync] exclude, .git/, .gpurun/).
. "$(dirname "$0")/../lib.sh"

SCAN=$BUILD/tests/scan_dump
export GIT_CONFIG_NOSYSTEM=1 LC_ALL=C
unset XDG_CONFIG_HOME GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE

if ! command -v git >/dev/null 2>&1; then
	test_skip 'ignore rules against git' 'git is not installed (it is the oracle)'
	test_done
fi
if [ ! -x "$SCAN" ]; then
	test_skip 'ignore rules against git' "no $SCAN (run make SAN=1 unit-bins)"
	test_done
fi

# What git would sync from DIR, one per line, folders with a trailing '/':
# tracked and untracked-but-not-ignored files, and every folder that
# check-ignore (which looks at parents too) does not ignore.
git_view() {
	(
		cd "$1" &&
		git -c core.quotepath=off ls-files --cached --others --exclude-standard &&
		find . -path ./.git -prune -o -type d ! -name . -print | sed 's|^\./||' >"$TRASH/dirs" &&
		{ git -c core.quotepath=off check-ignore --no-index --stdin <"$TRASH/dirs" >"$TRASH/igdirs"; [ $? -le 1 ]; } &&
		grep -vxF -f "$TRASH/igdirs" "$TRASH/dirs" | sed 's|$|/|' &&
		# the folders that hold a file git keeps (tracked inside ignored)
		git -c core.quotepath=off ls-files --cached --others --exclude-standard |
			sed -n 's|/[^/]*$|/|p' | while read -r d; do
				while [ -n "$d" ]; do echo "$d"; d=$(echo "$d" | sed 's|[^/]*/$||'); done
			done
	) | sort -u
}

scan_view() {
	"$SCAN" "$@" | sort
}

# The hand-written tree: every rule here is one people get wrong.
make_hand_tree() {
	mkdir -p "$1" && cd "$1" && git init -q . &&
	cat >.gitignore <<-\EOF &&
	# comments and blank lines are no rules

	*.o
	!keep.o
	/anchored
	doc/*.pdf
	build/
	!build/keep.txt
	logs/*
	!logs/important.log
	**/cache/
	a/**/z
	\#hash
	\!bang
	trail\ 
	spaces   
	[0-9][0-9].tmp
	[!a-z]*.bin
	[[:upper:]]*.dat
	bar/foo/
	ign-*/
	linkdir/
	sub/**/deep.txt
	EOF
	mkdir -p sub/deeper sub/x/q doc/x build logs cache x/cache y a/b/c bar/foo \
		"with space" emptydir ign-empty sub2 &&
	touch keep.o x.o sub/y.o sub/keep.o anchored sub/anchored doc/a.pdf doc/x/b.pdf \
		build/keep.txt build/out.bin logs/a.log logs/important.log cache/c1 x/cache/c2 \
		y/cache a/z a/b/c/z a/zz "#hash" "!bang" "trail " spaces "spaces " 12.tmp 1a.tmp \
		1.bin a.bin Upper.dat lower.dat foo bar/foo/f "with space/inner file" \
		"$(printf 'caf\303\251.txt')" sub/n.txt sub/local local sub/deeper/n.txt \
		sub/x/q/deep.txt sub/deep.txt s.secret x.bak sub2/r1 sub2/r2 &&
	printf '!y.o\n*.txt\n/local\n' >sub/.gitignore &&
	printf '!n.txt\n' >sub/deeper/.gitignore &&
	printf 'r1\n' >rules && ln -s ../rules sub2/.gitignore &&
	ln -s sub linkdir && ln -s /etc outside &&
	printf '*.secret\n' >>.git/info/exclude &&
	printf '*.bak\n' >"$HOME/.gitignore_global" &&
	printf '[core]\n\texcludesFile = "~/.gitignore_global"  ; a comment\n' >"$HOME/.gitconfig"
}

test_expect_success 'hand-written tree: gpurun syncs exactly what git keeps' '
	make_hand_tree hand &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" &&
	test_cmp "$TRASH/want" "$TRASH/got" &&
	# spot checks, so a broken oracle cannot pass silently
	grep -qx "keep.o" "$TRASH/got" && ! grep -qx "x.o" "$TRASH/got" && grep -qx "sub/y.o" "$TRASH/got" &&
	! grep -q "^build/" "$TRASH/got" && grep -qx "logs/important.log" "$TRASH/got" &&
	grep -qx "emptydir/" "$TRASH/got" && ! grep -q "^ign-empty" "$TRASH/got" && grep -qx "linkdir" "$TRASH/got" &&
	! grep -qx "s.secret" "$TRASH/got" && ! grep -qx "x.bak" "$TRASH/got" && grep -qx "spaces " "$TRASH/got" &&
	grep -qx "sub/deeper/n.txt" "$TRASH/got" &&
	# a symlinked .gitignore is not read (git refuses to follow it)
	grep -qx "sub2/r1" "$TRASH/got" && grep -qx "sub2/r2" "$TRASH/got"
'

test_expect_success 'the scan needs no git: same answer with git off PATH' '
	cd hand && scan_view . >"$TRASH/want" &&
	PATH=/nonexistent "$SCAN" . | sort >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got"
'

test_expect_success '--why names the rule git check-ignore -v names' '
	cd hand &&
	for p in keep.o x.o sub/y.o sub/keep.o anchored sub/anchored doc/a.pdf doc/x/b.pdf \
		build/keep.txt logs/a.log logs/important.log x/cache/c2 a/b/c/z "#hash" "!bang" \
		"trail " spaces "spaces " 12.tmp 1.bin a.bin Upper.dat s.secret x.bak \
		sub/n.txt sub/deeper/n.txt sub/deep.txt "with space/inner file" foo; do
		g=$(git -c core.quotepath=off check-ignore --no-index -v -n "$p") || [ $? = 1 ] || exit 1
		rule=${g%%	*}
		m=$("$SCAN" --why "$p" .) || exit 1
		case $rule in
		::) want="synced: '"'"'$p'"'"' (no rule matches)" ;;
		*)
			src=${rule%%:*} rest=${rule#*:} line=${rest%%:*} pat=${rest#*:}
			case $pat in
			!*) want="synced: '"'"'$p'"'"' re-included by $src:$line '"'"'$pat'"'"'" ;;
			*) want="$src:$line '"'"'$pat'"'"'" ;;
			esac ;;
		esac
		case $m in
		*"$want"*) ;;
		*) echo "path $p: git says [$g], gpurun says [$m], want [$want]"; exit 1 ;;
		esac
	done
'

test_expect_success '--why explains a re-include inside an ignored folder' '
	cd hand && "$SCAN" --why build/keep.txt . >"$TRASH/out" &&
	test_grep "^ignored: .build/keep.txt. because folder .build/. is ignored by .gitignore:7 .build/.$" "$TRASH/out" &&
	test_grep "^note: .gitignore:8 .!build/keep.txt. cannot re-include it" "$TRASH/out" &&
	"$SCAN" --why nothere/at/all . >"$TRASH/out" &&
	test_grep "^synced: .nothere/at/all. (no rule matches)" "$TRASH/out" &&
	test_grep "does not exist" "$TRASH/out" &&
	"$SCAN" --why .git/config . >"$TRASH/out" && test_grep "^ignored: .\.git/config. (\.git/ is never synced" "$TRASH/out"
'

test_expect_success 'tracked files are synced even when a rule ignores them (index v2, v3, v4)' '
	cd hand && git add -f x.o build/out.bin sub/n.txt &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" &&
	grep -qx x.o "$TRASH/got" && grep -qx build/out.bin "$TRASH/got" && grep -qx build/ "$TRASH/got" &&
	! grep -qx build/keep.txt "$TRASH/got" &&
	git add -N -f s.secret && git update-index --index-version 3 &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" && grep -qx s.secret "$TRASH/got" &&
	git update-index --index-version 4 &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" &&
	"$SCAN" --why x.o . >"$TRASH/out" && test_grep "tracked by git" "$TRASH/out"
'

test_expect_success 'core.ignoreCase: patterns match any case, as git does' '
	mkdir -p icase && cd icase && git init -q . && git config core.ignorecase true &&
	printf "*.TXT\n/Build/\n[A-C]x\n" >.gitignore &&
	mkdir -p build Sub && touch a.txt B.Txt build/f Sub/a.TXT bx dX &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" &&
	! grep -qx a.txt "$TRASH/got"
'

test_expect_success 'global excludes: $XDG_CONFIG_HOME/git/ignore, else ~/.config/git/ignore' '
	mkdir -p xdg && cd xdg && git init -q . && touch a.x b.y c.z &&
	rm -f "$HOME/.gitconfig" &&
	mkdir -p "$HOME/.config/git" "$TRASH/xdgconf/git" &&
	printf "*.x\n" >"$HOME/.config/git/ignore" &&
	printf "*.y\n" >"$TRASH/xdgconf/git/ignore" &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" &&
	! grep -qx a.x "$TRASH/got" && grep -qx b.y "$TRASH/got" &&
	XDG_CONFIG_HOME=$TRASH/xdgconf git_view . >"$TRASH/want" &&
	XDG_CONFIG_HOME=$TRASH/xdgconf scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" &&
	grep -qx a.x "$TRASH/got" && ! grep -qx b.y "$TRASH/got" &&
	printf "[core]\n\texcludesfile = ~/nothere\n" >"$HOME/.gitconfig" &&
	git_view . >"$TRASH/want" && scan_view . >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got" &&
	grep -qx a.x "$TRASH/got" && rm "$HOME/.gitconfig"
'

test_expect_success 'names with newlines, tabs, backslashes and non-UTF-8 bytes' '
	mkdir -p odd && cd odd && git init -q . &&
	printf "*.o\n" >.gitignore &&
	touch "$(printf "new\nline")" "$(printf "tab\there")" "back\\slash" \
		"$(printf "\377\376raw")" "$(printf "\377.o")" "quote\"d" &&
	git ls-files -z --others --exclude-standard | sort -z | od -c >"$TRASH/want" &&
	"$SCAN" -z . | sort -z | od -c >"$TRASH/got" && test_cmp "$TRASH/want" "$TRASH/got"
'

test_expect_success '.git/ and .gpurun/ are never listed; include_git lists .git whole' '
	mkdir -p gitdir && cd gitdir && git init -q . && printf "*.pack\n*\n!*/\n" >.git/info/exclude &&
	mkdir -p .gpurun sub/.git && touch .gpurun/state sub/.git/x f &&
	printf "*\n!f\n!*/\n" >.gitignore &&
	scan_view . >"$TRASH/got" && ! grep -q "^\.git" "$TRASH/got" && ! grep -q "\.gpurun" "$TRASH/got" &&
	! grep -q "sub/\.git" "$TRASH/got" && grep -qx f "$TRASH/got" &&
	"$SCAN" --include-git . | sort >"$TRASH/got" &&
	grep -qx ".git/HEAD" "$TRASH/got" && grep -qx ".git/info/exclude" "$TRASH/got" && grep -qx ".git/" "$TRASH/got" &&
	! grep -q "\.gpurun" "$TRASH/got"
'

test_expect_success '.gpurunignore and [sync] exclude layer on top of git' '
	mkdir -p layers/sub layers/data/raw && cd layers && git init -q . &&
	printf "*.o\n*.log\n" >.gitignore &&
	printf "!special.o\n*.ckpt\n" >.gpurunignore &&
	printf "!z.log\n" >sub/.gpurunignore &&
	printf "*.txt\n" >sub/.gitignore &&
	printf "!n.txt\n" >>sub/.gpurunignore &&
	touch special.o other.o model.ckpt sub/z.log sub/w.log sub/n.txt sub/m.txt data/raw/big data/keep &&
	scan_view . >"$TRASH/got" &&
	grep -qx special.o "$TRASH/got" && ! grep -qx other.o "$TRASH/got" && ! grep -qx model.ckpt "$TRASH/got" &&
	grep -qx sub/z.log "$TRASH/got" && ! grep -qx sub/w.log "$TRASH/got" &&
	grep -qx sub/n.txt "$TRASH/got" && ! grep -qx sub/m.txt "$TRASH/got" &&
	grep -qx data/raw/big "$TRASH/got" &&
	"$SCAN" --exclude "data/raw/" --exclude "z.log" . | sort >"$TRASH/got" &&
	! grep -q "^data/raw" "$TRASH/got" && grep -qx data/keep "$TRASH/got" && ! grep -qx sub/z.log "$TRASH/got" &&
	"$SCAN" --exclude "data/raw/" --why data/raw/big . >"$TRASH/out" &&
	test_grep "because folder .data/raw/. is ignored by \[sync\] exclude:1 .data/raw/." "$TRASH/out" &&
	"$SCAN" --why special.o . >"$TRASH/out" &&
	test_grep "^synced: .special.o. re-included by .gpurunignore:1 .!special.o.$" "$TRASH/out"
'

test_expect_success 'symlinks are listed with their target and never followed' '
	mkdir -p links/real && cd links && touch real/f && ln -s real lnk && ln -s /etc etc &&
	ln -s "dangling target" dangling &&
	"$SCAN" -l . >"$TRASH/out" &&
	test_grep -x "l 0777 4 lnk -> real" "$TRASH/out" && test_grep -x "l 0777 4 etc -> /etc" "$TRASH/out" &&
	test_grep -x "l 0777 15 dangling -> dangling target" "$TRASH/out" &&
	! grep -q "lnk/" "$TRASH/out" && ! grep -q "passwd" "$TRASH/out"
'

test_expect_success 'FIFOs and sockets are skipped; empty folders are listed' '
	mkdir -p special/empty && cd special && mkfifo pipe && touch f &&
	printf "x\n" >.gitignore && mkfifo .gpurunignore &&
	scan_view . >"$TRASH/got" && printf ".gitignore\nempty/\nf\n" >"$TRASH/want" && test_cmp "$TRASH/want" "$TRASH/got"
'

test_expect_success 'scan output is in plain byte order of the path' '
	mkdir -p order/a order/a-b && cd order && touch a/x a-b/y a0 A &&
	"$SCAN" . >"$TRASH/got" && printf "A\na/\na-b/\na-b/y\na/x\na0\n" >"$TRASH/want" && test_cmp "$TRASH/want" "$TRASH/got"
'

test_expect_success 'an unreadable folder is an error naming it; an ignored one is never opened' '
	mkdir -p perm/locked perm/skipped && cd perm && touch locked/f skipped/f &&
	chmod 000 locked skipped && chmod 755 . && chmod 755 "$TRASH" &&
	printf "skipped/\n" >.gitignore &&
	if [ "$(id -u)" = 0 ]; then
		command -v setpriv >/dev/null || { echo "no setpriv to drop root"; exit 1; }
		run() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
	else
		run() { "$@"; }
	fi &&
	test_expect_code 1 run "$SCAN" . 2>"$TRASH/err" &&
	test_grep "cannot open folder .locked.: Permission denied" "$TRASH/err" &&
	test_grep "^hint: " "$TRASH/err" &&
	chmod 755 locked && run "$SCAN" . >"$TRASH/got" && grep -qx locked/f "$TRASH/got" &&
	chmod 755 skipped
'

test_expect_success 'generated trees: gpurun and git agree (100 seeds)' '
	python3 "$TOP/tests/ignore_oracle.py" "$SCAN" "$TRASH/gen" 1 100 >"$TRASH/out" 2>&1 ||
		{ cat "$TRASH/out"; exit 1; }
	cat "$TRASH/out" && test_grep "100 trees, .* 0 trees differ" "$TRASH/out"
'

test_done
