#!/usr/bin/python3
"""expect.py CODE REGEX [--json FILE KEY VALUE]... -- CMD ...: run CMD, require exit code CODE and
stderr matching REGEX (and summary JSON fields), so CLI failures are tested as black boxes."""
import json, re, subprocess, sys

sep = sys.argv.index("--")
code, regex, rest, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:sep], sys.argv[sep + 1:]
p = subprocess.run(cmd, capture_output=True, text=True)
print(p.stdout, end="")
print(p.stderr, end="", file=sys.stderr)
ok = p.returncode == code and re.search(regex, p.stderr) is not None
if not ok:
    print(f"expected exit {code} and stderr /{regex}/, got exit {p.returncode}", file=sys.stderr)
while rest:
    flag, f, key, val = rest[:4]
    rest = rest[4:]
    got = json.load(open(f)).get(key)
    if str(got).lower() != val.lower():
        print(f"{f}: {key} = {got!r}, expected {val}", file=sys.stderr)
        ok = False
sys.exit(0 if ok else 1)
