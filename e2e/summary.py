"""Relays `go test -json` output as plain text, then names each failed
test with the last lines it printed, so a failure's message survives a
log that keeps only its tail (CI's stored log does)."""
import collections
import json
import sys

LAST = 25  # lines kept per test

lines = collections.defaultdict(lambda: collections.deque(maxlen=LAST))
failed = []
for raw in sys.stdin:
    try:
        ev = json.loads(raw)
    except ValueError:  # a build error, or anything not an event
        sys.stdout.write(raw)
        continue
    out, test = ev.get("Output"), ev.get("Test")
    if out is not None:
        sys.stdout.write(out)
        sys.stdout.flush()
        if test:
            lines[(ev.get("Package"), test)].append(out.rstrip("\n"))
    if ev.get("Action") == "fail" and test:
        failed.append((ev.get("Package"), test))

names = {t for _, t in failed}
leaves = [(p, t) for p, t in failed if not any(o.startswith(t + "/") for o in names)]
if leaves:
    print(f"\n== e2e: {len(leaves)} failed tests, with the last lines each printed")
    for key in leaves:
        print(f"--- FAIL: {key[1]}")
        for line in lines[key]:
            print("    " + line.strip())
