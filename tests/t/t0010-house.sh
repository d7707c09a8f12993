#!/bin/bash
# The house's rules (issue 31), checked on the tree as it is: each binary
# has its own include path, so one cannot include the other's header; no
# file includes a .c file; each library defines a symbol once; the agent's
# hash covers what the agent is built from and nothing of the client; the
# agent's runtime (remote/agent/) sits below its request folders.
. "$(dirname "$0")/../lib.sh"

must_be_empty() { [ ! -s "$1" ] || { cat "$1"; return 1; }; }
mk() { make -s --no-print-directory -C "$1" "print-$2"; }

test_expect_success 'no source file includes a .c file' '
	cd "$TOP" &&
	! grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<][^\">]*\.c[\">]" \
		cli remote common config tests/unit tests/fuzz tests/helpers
'

test_expect_success 'the agent cannot include a client header, nor the client an agent one' '
	client=$(mk "$TOP" CLIENT_INC) && agent=$(mk "$TOP" AGENT_INC) &&
	test -n "$client" && test -n "$agent" &&
	for h in proto.h sync_manifest.h util.h; do
		echo "#include \"$h\"" | (cd "$TOP" && cc -D_GNU_SOURCE $agent -fsyntax-only -x c -) &&
		echo "#include \"$h\"" | (cd "$TOP" && cc -D_GNU_SOURCE $client -fsyntax-only -x c -) || return 1
	done &&
	for h in conn.h sync.h gpurun.h ignore.h transport.h config.h; do
		! echo "#include \"$h\"" | (cd "$TOP" && cc -D_GNU_SOURCE $agent -fsyntax-only -x c - 2>/dev/null) || return 1
	done &&
	for h in agent.h job_store.h sync_agent.h job_pack.h; do
		! echo "#include \"$h\"" | (cd "$TOP" && cc -D_GNU_SOURCE $client -fsyntax-only -x c - 2>/dev/null) || return 1
	done
'

test_expect_success 'file names are unique across the two binaries and common/' '
	(cd "$TOP" && find cli remote common config -name "*.[ch]" ! -name main.c -printf "%f\n") |
		sort | uniq -d >dups &&
	must_be_empty dups
'

test_expect_success 'each library defines each global symbol once' '
	for lib in libgr.a libagent.a; do
		nm -A --defined-only -g "$GPURUN_BUILD/$lib" >syms &&
		test -s syms &&
		awk "\$2 ~ /^[TDBR]\$/ { print \$3 }" syms | sort | uniq -d || return 1
	done >dups &&
	must_be_empty dups
'

# The two binaries share only common/: a symbol both libraries define
# comes from the same common/ object in each (before, sync_hash_fd had one
# definition per binary, and each linker picked its own).
test_expect_success 'a symbol both binaries define is common/'"'"'s' '
	defs() { nm -A --defined-only -g "$GPURUN_BUILD/$1" 2>/dev/null |
		awk "\$2 ~ /^[TDBR]\$/ { n = split(\$1, f, \":\"); print \$3, f[n - 1] }" |
		sort; } &&
	defs libgr.a >client && defs libagent.a >agent &&
	test -s client && test -s agent &&
	common=$(cd "$TOP" && find common -name "*.c" -printf "%f\n" | sed "s/\\.c\$/.o/" | sort | tr "\n" " ") &&
	join client agent >both &&
	while read -r sym a b; do
		[ "$a" = "$b" ] && case " $common " in *" $a "*) ;; *) false ;; esac ||
			{ echo "$sym: $a (client) / $b (agent)"; return 1; }
	done <both
'

test_expect_success 'the agent hash changes with the agent sources, not with the client' '
	(cd "$TOP" && git ls-files -z | xargs -0 tar cf -) | (mkdir tree && cd tree && tar xf -) &&
	h0=$(mk tree AGENT_HASH) &&
	echo "/* a client edit */" >>tree/cli/cmd/gpurun.h &&
	echo "/* a client edit */" >>tree/cli/sync/sync.c &&
	h1=$(mk tree AGENT_HASH) &&
	echo "/* an agent edit */" >>tree/remote/agent/agent.h &&
	h2=$(mk tree AGENT_HASH) &&
	echo "/* a shared edit */" >>tree/common/proto/proto.h &&
	h3=$(mk tree AGENT_HASH) &&
	test -n "$h0" && test "$h0" = "$h1" && test "$h1" != "$h2" && test "$h2" != "$h3"
'

test_expect_success 'remote/agent/ (the runtime) includes no header of the agent'"'"'s request folders' '
	for h in $(cd "$TOP/remote" && ls job/*.h sync/*.h pull/*.h | xargs -n1 basename); do
		grep -ln "#include \"$h\"" "$TOP"/remote/agent/*.[ch] || true
	done >up &&
	must_be_empty up
'

# faces: for each folder of cli/ and remote/, the headers of its that files
# of other folders include ("FOLDER N NAMES").
faces() {
	(cd "$TOP" && python3 -c '
import collections, glob, os, re
home = {}
for top in ("cli", "remote"):
    for h in glob.glob(top + "/*/*.h"):
        home[os.path.basename(h)] = os.path.dirname(h)
shown = collections.defaultdict(set)
for top in ("cli", "remote", "config"):
    for f in glob.glob(top + "/**/*.[ch]", recursive=True):
        for h in re.findall(r"^#include \"([^\"]+)\"", open(f).read(), re.M):
            if h in home and home[h] != os.path.dirname(f):
                shown[home[h]].add(h)
for d in sorted(shown):
    print(d, len(shown[d]), " ".join(sorted(shown[d])))
')
}

test_expect_success 'each folder of cli/ and remote/ shows one header (its face) to the others' '
	faces >faces &&
	cat faces &&
	test -s faces &&
	awk "\$2 != 1 { bad = 1 } END { exit bad }" faces
'

test_done
