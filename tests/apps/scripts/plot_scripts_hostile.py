#!/usr/bin/python3
"""The plotting scripts (scripts/plot_ec_timeline.py, scripts/report_plots.py) on inputs that are
not what they expect: one error line naming the file or option, resil's exit code (2 usage, 3 a
file that cannot be read or written, 4 not the expected report), never a Python traceback, and no
output written.

  plot_scripts_hostile.py SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

SRC, WORK = sys.argv[1], os.path.join(sys.argv[2], "plot_scripts_hostile")
TIMELINE = os.path.join(SRC, "scripts", "plot_ec_timeline.py")
REPORT = os.path.join(SRC, "scripts", "report_plots.py")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)
failed = []


def write(name, text):
    with open(name, "w") as f:
        f.write(text)
    return name


def expect(code, needle, *args):
    p = subprocess.run(["/usr/bin/python3", *args], capture_output=True, text=True, timeout=120)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    problems = []
    if p.returncode != code:
        problems.append(f"exit {p.returncode}, expected {code}")
    if "Traceback" in p.stderr:
        problems.append("a traceback")
    elif code != 2 and len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines, expected one")
    if needle not in p.stderr:
        problems.append(f"stderr lacks {needle!r}")
    if problems:
        failed.append(f"{' '.join(os.path.basename(a) for a in args)}: {'; '.join(problems)}: {p.stderr.strip()[-400:]}")


empty, obj, junk = write("empty.json", ""), write("obj.json", "{}"), write("junk.json", "not json\n")
short = write("short.json", json.dumps({"batch": 8, "failures": [], "timeline": {"step": [1, 2], "t": [0.1, 0.2], "dt": [0.1], "phase": ["normal", "normal"]}}))
good_tl = write("good.json", json.dumps({"batch": 8, "failures": [], "ft": "ec", "world_size": 2, "k": 1, "m": 1, "seed": 1, "state_hash": "x",
                                         "timeline": {"step": [1, 2], "t": [0.1, 0.2], "dt": [0.1, 0.1], "phase": ["normal", "normal"]}}))
for bad, code, needle in ((empty, 4, "empty.json: not an ec-train report"), (obj, 4, "obj.json: not an ec-train report"),
                          (junk, 4, "junk.json: not an ec-train report"), ("missing.json", 3, "missing.json: No such file"),
                          (short, 4, "short.json: the timeline's lists differ")):
    expect(code, needle, TIMELINE, bad, "out.png")
expect(2, "--title needs a value", TIMELINE, good_tl, "out.png", "--title")
expect(3, "nodir: the directory of OUT.png is not an existing directory", TIMELINE, good_tl, "nodir/out.png")
for bad, code, needle in ((empty, 4, "empty.json: not a ckpt-flip report"), (obj, 4, "obj.json: not a ckpt-flip report"),
                          ("missing.json", 3, "missing.json: No such file")):
    expect(code, needle, REPORT, bad, ".")
rep = write("rep.json", json.dumps({"campaign": {}, "overall": {}, "by": {}, "trials": {}}))
expect(3, "nodir: OUTDIR is not an existing directory", REPORT, rep, "nodir")
expect(4, "rep.json: a malformed report", REPORT, rep, ".")
expect(2, "'nolabel': give LABEL=REPORT.json", REPORT, "--compare", "o.png", "nolabel")
expect(2, "--by takes one of role, field, bit", REPORT, "--compare", "o.png", "a=" + rep, "--by")
expect(2, "--by takes one of role, field, bit", REPORT, "--compare", "o.png", "a=" + rep, "--by", "nonsense")
expect(2, "--group takes one of sdc, due", REPORT, "--compare", "o.png", "a=" + rep, "--group", "xyz")
left = [n for n in os.listdir(".") if n.endswith(".png")]
if left:
    failed.append(f"outputs written by refused runs: {left}")
for f in failed:
    print("FAIL: " + f)
print("ok: plot scripts refuse bad input with one line" if not failed else f"{len(failed)} failures")
sys.exit(1 if failed else 0)
