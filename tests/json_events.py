#!/usr/bin/env python3
"""Consumer of gpurun's NDJSON events (t0450): runs a gpurun command,
reads its stdout line by line as the lines come, checks every line is one
JSON object in strict UTF-8 with "event" and an RFC 3339 "time", and
writes the events (as a JSON list) to OUT. With --go FILE: touches FILE
once the event named by --go-after has come (the job waits for it, so the
events are shown to stream while the job runs).

    json_events.py OUT [--go FILE --go-after EVENT] -- gpurun ARGS...

Exit status: gpurun's; 90 when a line is not a valid event."""
import json, re, subprocess, sys

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

def main():
    args = sys.argv[1:]
    out = args.pop(0)
    go = go_after = None
    while args[0] != "--":
        if args[0] == "--go":
            go = args[1]
        elif args[0] == "--go-after":
            go_after = args[1]
        args = args[2:]
    cmd = args[1:]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    events = []
    bad = None
    for raw in p.stdout:
        try:
            text = raw.decode("utf-8", "strict")
            assert text.endswith("\n") and "\n" not in text[:-1], "one line"
            ev = json.loads(text)
            assert isinstance(ev, dict), "an object"
            assert isinstance(ev.get("event"), str), "an event"
            assert TIME.match(ev.get("time", "")), "an RFC 3339 time"
        except Exception as e:  # keep reading: the job must end
            bad = bad or "%r: %s" % (raw[:200], e)
            continue
        events.append(ev)
        if go and ev["event"] == go_after:
            open(go, "w").close()
            go = None
    rc = p.wait()
    with open(out, "w") as f:
        json.dump(events, f, indent=1)
    if bad:
        print("not a valid event: " + bad, file=sys.stderr)
        sys.exit(90)
    sys.exit(rc)

main()
