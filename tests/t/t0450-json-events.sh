#!/bin/bash
# --json for scripts and agents, over libssh2 to a real sshd: `train
# --json` and `logs -f --json` stream NDJSON events (synced, queued,
# started, log, pulled, ended) read line by line as they come
# (tests/json_events.py), the log's lines cut as documented (\r, \r\n, a
# long line, a partial last line); `status --json` is schema 1 (RFC 3339
# times, gpus and argv as arrays); and every --json output is valid JSON
# in valid UTF-8 when a job's command and log hold invalid UTF-8 and
# control bytes.
. "$(dirname "$0")/../lib.sh"

P=$TRASH/proj
RH=$TRASH/gpuhost-home
EV="python3 $TOP/tests/json_events.py"
# strict FILE: FILE is one JSON document in strict UTF-8.
strict() { python3 -c 'import json,sys; json.loads(open(sys.argv[1],"rb").read().decode("utf-8","strict"))' "$1"; }
stop_all() {
	[ -f "$P/gpurun.ini" ] || return 0
	(cd "$P" && "$GPURUN" status --all 2>/dev/null | awk '$2 == "running" || $2 == "queued" { print $1 }' |
		while read -r j; do "$GPURUN" -q stop "$j" >/dev/null 2>&1; done)
}
test_atexit stop_all

test_expect_success 'a project on an sshd; a job that waits for a go file' '
	start_sshd gpuhost && trust_sshd gpuhost && mkdir -p "$P/out" &&
	write_ini "$P" gpuhost libssh2 proj &&
	printf "[build]\ncommand =\n[train]\nstop_grace = 1\n[artifacts]\npull = out/*.bin\n" >>"$P/gpurun.ini" &&
	cat >"$P/job.py" <<-\PY
	import os, sys, time
	w = sys.stdout.buffer
	def say(b):
	    w.write(b); w.flush()
	say(b"begin\n")
	while not os.path.exists(sys.argv[1]):
	    time.sleep(0.05)
	say(b"after go\n")
	say(b"bad \xff\x1b[31m\x00red\n")
	say(b"p 10%\rp 50%\r")
	time.sleep(0.2)
	say(b"p 100%\ncrlf\r\n")
	say(b"x" * 16383 + "\u00e9".encode() + b"y" * 40000 + b"\n")
	os.makedirs("out", exist_ok=True)
	open("out/model.bin", "wb").write(b"w" * 1000)
	say(b"tail")
	sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
	PY
'

test_expect_success 'train --json: synced, started, the log as lines, pulled, ended; exit status kept' '
	cd "$P" && rm -f go &&
	test_expect_code 3 $EV ev.json --go "$P/go" --go-after started -- \
		"$GPURUN" train --json -- python3 job.py "$P/go" 3 "$(printf "\377\001")" "a,b c" "" 2>err &&
	python3 - ev.json <<-\PY
	import json, sys
	ev = json.load(open(sys.argv[1]))
	names = [e["event"] for e in ev]
	assert names[0] == "synced" and ev[0]["files"] >= 1 and ev[0]["bytes"] > 0, ev[0]
	assert names[-1] == "ended" and names[-2] == "pulled", names
	assert names.count("started") == 1 and names.count("ended") == 1, names
	s = ev[names.index("started")]
	assert s["host"] == "gpuhost" and s["gpus"] is None and len(s["job"]) == 20, s
	logs = [(e["line"], e["end"]) for e in ev if e["event"] == "log"]
	# the consumer touched go only after started: "after go" comes after it
	first = next(i for i, e in enumerate(ev) if e["event"] == "log" and e["line"] == "after go")
	assert first > names.index("started"), names
	want = [("after go", "lf"), ("bad \ufffd\x1b[31m\x00red", "lf"), ("p 10%", "cr"),
	        ("p 50%", "cr"), ("p 100%", "lf"), ("crlf", "lf")]
	got = [l for l in logs if l[0] != "begin" and not l[0].startswith("[gpurun]")]
	assert got[:6] == want, got[:6]
	cut = got[6:-1]
	assert [c[1] for c in cut] == ["cut"] * (len(cut) - 1) + ["lf"], [c[1] for c in cut]
	assert cut[0][0] == "x" * 16383, len(cut[0][0])       # not inside the é
	assert all(len(c[0].encode()) <= 16384 for c in cut), [len(c[0]) for c in cut]
	assert "".join(c[0] for c in cut) == "x" * 16383 + "\u00e9" + "y" * 40000
	assert got[-1] == ("tail", "eof"), got[-1]
	p = ev[-2]
	assert p["files"] == 1 and p["bytes"] == 1000, p
	e = ev[-1]
	assert e["state"] == "failed" and e["exit_code"] == 3 and e["signal"] is None, e
	assert e["job"] == s["job"]
	PY
	test -f runs/*/out/model.bin && test_grep "exited with status 3" err
'

test_expect_success 'status --json: schema 1, RFC 3339 times, argv and gpus as arrays, valid UTF-8' '
	cd "$P" && "$GPURUN" status --json >st.json && strict st.json &&
	python3 - st.json <<-\PY
	import json, re, sys
	d = json.load(open(sys.argv[1]))
	assert d["schema"] == 1, d
	j = d["jobs"][0]
	t = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
	for k in ("created", "start", "end"):
	    assert t.match(j[k]), (k, j[k])
	    assert isinstance(j[k + "_unix_ms"], int), j
	assert j["start_unix_ms"] <= j["end_unix_ms"], j
	assert j["argv"][:2] == ["python3", "job.py"] and j["argv"][3:] == ["3", "\ufffd\x01", "a,b c", ""], j["argv"]
	assert j["command_is_argv"] is True and j["gpus"] is None, j
	assert isinstance(j["duration_s"], float) and "time_limit_s" in j and "time_limit" not in j, j
	assert j["exit_code"] == 3 and j["state"] == "failed", j
	PY
'

test_expect_success 'logs --json: the same lines; logs -f --json of a running job ends with ended' '
	cd "$P" && "$GPURUN" logs --json >l.json && strict_lines() {
		python3 -c "
import json, sys
for raw in open(sys.argv[1], \"rb\"):
    json.loads(raw.decode(\"utf-8\", \"strict\"))
" "$1"; } && strict_lines l.json &&
	test_grep -c "\"event\": \"log\"" l.json >n && test "$(cat n)" -ge 10 &&
	! grep -q "\"event\": \"ended\"" l.json &&
	rm -f go2 && id=$("$GPURUN" train -d -- python3 job.py "$P/go2" 0 2>/dev/null) &&
	$EV lf.json --go "$P/go2" --go-after started -- "$GPURUN" logs -f --json "$id" &&
	python3 - lf.json "$id" <<-\PY
	import json, sys
	ev = json.load(open(sys.argv[1]))
	names = [e["event"] for e in ev]
	assert names[-1] == "ended" and ev[-1]["exit_code"] == 0 and ev[-1]["job"] == sys.argv[2], ev[-1]
	assert "pulled" not in names and "synced" not in names, names
	assert [e["line"] for e in ev if e["event"] == "log"][-1] == "tail", names
	PY
'

test_expect_success 'train --json --after: queued (after the job), then started and ended' '
	cd "$P" && rm -f go3 go4 &&
	a=$("$GPURUN" train -d -- python3 job.py "$P/go3" 0 2>/dev/null) &&
	$EV q.json --go "$P/go3" --go-after queued -- "$GPURUN" train --json --after "$a" -- true &&
	python3 - q.json "$a" <<-\PY
	import json, sys
	ev = json.load(open(sys.argv[1]))
	names = [e["event"] for e in ev]
	q = ev[names.index("queued")]
	assert q["after"] == sys.argv[2] and q["waits_for"], q
	assert names.index("synced") < names.index("queued") < names.index("started") < names.index("ended"), names
	assert ev[-1]["event"] == "ended" and ev[-1]["exit_code"] == 0, ev[-1]
	PY
'

test_expect_success 'train --json -d: synced, then detached with the id; a sweep refuses --json' '
	cd "$P" && $EV d.json -- "$GPURUN" train --json -d -- true &&
	python3 -c "import json,sys; ev=json.load(open(sys.argv[1])); assert [e[\"event\"] for e in ev] == [\"synced\", \"detached\"], ev" d.json &&
	test_expect_code 252 "$GPURUN" train --json --sweep lr=1,2 -- true 2>err &&
	test_grep "json needs a job to follow" err
'

test_expect_success 'config --json: valid UTF-8 when a value holds invalid bytes (control bytes are refused)' '
	cd "$P" && GPURUN_TRAIN_COMMAND="$(printf "python \377\342\202 \303\251 x")" "$GPURUN" config --json >c.json &&
	strict c.json && python3 -c "import json,sys; v=json.load(open(sys.argv[1]))[\"keys\"][\"train.command\"][\"value\"]; assert v == \"python \ufffd\ufffd\ufffd \u00e9 x\", v" c.json
'

test_done
