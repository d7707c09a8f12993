#!/bin/bash
# Secrets in a job's environment, over a real sshd: --env NAME takes
# NAME's value from here (as docker run -e NAME), --env-file FILE reads
# dotenv lines here. The job sees every value byte-exact; no value (those
# given inline and in [train] env included) shows in status, status JOB,
# status --json, -vv or trace output, the local job cache, or any file on
# the host but the job's spec (0600, in a 0700 folder); an unset NAME is
# refused, and a bad env-file line names FILE:LINE.
. "$(dirname "$0")/../lib.sh"

start_sshd gpuhost || { test_skip 'env secrets over ssh' 'sshd could not start here'; test_done; }
trust_sshd gpuhost
P=$TRASH/proj
HOSTHOME=$TRASH/gpuhost-home
mkdir -p "$P"
write_ini "$P" gpuhost libssh2 proj
stop_all() {
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q -o train.stop_grace=0 stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all
# Every secret holds MARK, so one grep finds any of them anywhere. A
# [train] env value (INIMARK) is shown nowhere either, but it is in
# gpurun.ini, which is synced with the project: the host has it there.
MARK=zq7mark
INIMARK=zq8ini
cat >>"$P/gpurun.ini" <<INI
[build]
command =
[train]
command = python3 check.py FROM_INI
env = FROM_INI=ini-$INIMARK-1
INI
# The job prints a hash of each variable it is asked about: proof it got
# the value, without writing the value anywhere.
cat >"$P/check.py" <<'PY'
import hashlib, os, sys
for name in sys.argv[1:]:
    v = os.environ.get(name)
    print("HASH %s %s" % (name, "unset" if v is None else hashlib.sha256(v.encode()).hexdigest()),
          flush=True)
PY
(cd "$P" && git init -q -b main . && printf 'runs/\n/out\n/err\n/st*\n/vv*\n' >.gitignore)

export TOKEN_A="tok-$MARK-a"
# A value with what a command line or a naive file would mangle.
export TOKEN_B="tok $MARK 'b' \"q\" \$x"
unset UNSET_SECRET
cat >"$TRASH/secrets.env" <<EOF
# the job's secrets
export FILE_A=file-$MARK-a
FILE_B = "two\nlines $MARK"   # a comment
FILE_C='single \$MARK $MARK'

TOKEN_A
EOF
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
want_hash() { printf 'HASH %s %s\n' "$1" "$(sha "$2")"; }

test_expect_success 'the job sees --env NAME, --env-file and inline values byte-exact' '
	cd "$P" &&
	"$GPURUN" train --env TOKEN_A --env TOKEN_B --env-file "$TRASH/secrets.env" \
		--env INLINE=inline-$MARK-x -- \
		python3 check.py TOKEN_A TOKEN_B FILE_A FILE_B FILE_C INLINE FROM_INI >out 2>err ||
		{ cat out err; exit 1; }
	{ want_hash TOKEN_A "$TOKEN_A" && want_hash TOKEN_B "$TOKEN_B" &&
	  want_hash FILE_A "file-$MARK-a" && want_hash FILE_B "two
lines $MARK" && want_hash FILE_C "single \$MARK $MARK" &&
	  want_hash INLINE "inline-$MARK-x" && want_hash FROM_INI "ini-$INIMARK-1"; } >want &&
	grep "^HASH " out >got && test_cmp want got
'
JOB=$(cut -f1 "$P/.gpurun/jobs" 2>/dev/null | head -n1)

test_expect_success 'status, status JOB, status --json and -vv show no value' '
	cd "$P" && test -n "$JOB" &&
	"$GPURUN" status >st 2>&1 && "$GPURUN" status "$JOB" >st-job 2>&1 &&
	"$GPURUN" status --json >st-json 2>&1 && "$GPURUN" status --json "$JOB" >st-json-job 2>&1 &&
	"$GPURUN" -vv status "$JOB" >vv-status 2>&1 &&
	test_grep "$JOB" st && test_grep "$JOB" st-job &&
	! grep -l -e "$MARK" -e "$INIMARK" st st-job st-json st-json-job vv-status
'

HEXMARK=$(printf '%s' "$MARK" | od -An -tx1 | tr -d ' \n')
test_expect_success '-vv and GPURUN_TRACE output of a train holds no value (libssh2 and openssh)' '
	cd "$P" &&
	GPURUN_TRACE=1 "$GPURUN" -vv train -d --env TOKEN_A --env-file "$TRASH/secrets.env" \
		--env INLINE=inline-$MARK-y >vv-out 2>vv-err &&
	GPURUN_TRACE=1 "$GPURUN" train --env TOKEN_A --env-file "$TRASH/secrets.env" \
		-o remote.transport=openssh -vv --detach >vv-out2 2>vv-err2 &&
	test_grep "^trace: " vv-err && test -s vv-err2 &&
	! grep -il -e "$MARK" -e "$HEXMARK" -e "$INIMARK" vv-out vv-err vv-out2 vv-err2 &&
	! grep -rl -e "$MARK" -e "$INIMARK" .gpurun
'

test_expect_success 'on the host only the jobs'"'"' spec files hold a value: 0600, in 0700 folders' '
	cd "$P" &&
	for j in $(cut -f1 .gpurun/jobs); do "$GPURUN" logs -f "$j" >/dev/null 2>&1; done
	grep -rl "$MARK" "$HOSTHOME" >holders; sort holders >h && mv h holders &&
	test -s holders &&
	while read -r f; do
		case $f in */.gpurun/spec) ;; *) say "a value in $f"; exit 1 ;; esac
		test "$(stat -c %a "$f")" = 600 || { say "$f: mode $(stat -c %a "$f")"; exit 1; }
		jd=${f%/.gpurun/spec}
		test "$(stat -c %a "$jd")" = 700 && test "$(stat -c %a "$jd/.gpurun")" = 700 ||
			{ say "$jd: modes $(stat -c %a "$jd" "$jd/.gpurun")"; exit 1; }
	done <holders &&
	jd=$(dirname "$(dirname "$(head -n1 holders)")") &&
	find "$jd" -type f -perm /044 >readable &&
	test -s readable &&
	! xargs -r grep -l "$MARK" <readable
'

test_expect_success '--env NAME that is not set here is refused, naming it; no job starts' '
	cd "$P" && "$GPURUN" status --all >before &&
	test_expect_code 252 "$GPURUN" train --env UNSET_SECRET -- true 2>err &&
	test_grep "^gpurun: --env: UNSET_SECRET is not set in this environment" err &&
	printf "A=1\nUNSET_SECRET\n" >"$TRASH/unset.env" &&
	test_expect_code 252 "$GPURUN" train --env-file "$TRASH/unset.env" -- true 2>err &&
	test_grep "unset.env:2: UNSET_SECRET is not set in this environment" err &&
	test_expect_code 252 "$GPURUN" train --env "1BAD" -- true 2>err &&
	test_grep "is not a variable name" err &&
	"$GPURUN" status --all >after && test_cmp before after
'

test_expect_success '--env-file: a bad line says FILE:LINE; a missing file says so' '
	cd "$P" &&
	printf "# ok\nA=1\nB C=2\n" >"$TRASH/bad.env" &&
	test_expect_code 252 "$GPURUN" train --env-file "$TRASH/bad.env" -- true 2>err &&
	test_grep "^gpurun: $TRASH/bad.env:3: not NAME=VALUE" err &&
	printf "A=\"open\nB=2\n" >"$TRASH/bad2.env" &&
	test_expect_code 252 "$GPURUN" train --env-file="$TRASH/bad2.env" -- true 2>err &&
	test_grep "bad2.env:1: a \" is not closed" err &&
	test_expect_code 252 "$GPURUN" train --env-file "$TRASH/none.env" -- true 2>err &&
	test_grep "cannot open .*none.env" err &&
	! grep -q "$MARK" err
'

test_done
