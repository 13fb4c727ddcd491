#!/usr/bin/python3
"""Checks for ec-train's CTest suite (tests/ecrm/CMakeLists.txt).

  compare REF RUN [--outcome rebuilt|rolled-back] [--failures N]
      RUN ended with REF's state_hash (bit-exact recovery), its parity verified, and its failure
      records say what was expected.
  expect-exit CODE REGEX [--one-line] [--repeat N] -- CMD...
      CMD exits with CODE and its stderr matches REGEX (one 'ec-train: error:' line). --one-line:
      stderr holds exactly that one line (under mpiexec: printed once, not once per rank, and not
      lost to MPI_Abort); --repeat: N runs, each must pass (a lost line showed in 1 of 6 runs);
      --no-segments JOB: no state segment of job JOB is left in /dev/shm afterwards.
  preempt REF -- CMD...
      CMD (with --signal-at) exits 75 after writing a checkpoint; the same CMD again resumes and
      ends with REF's state_hash.
  plot RUN PNG
      scripts/plot_ec_timeline.py renders RUN into a PNG.
  commit-cost SMALL LARGE
      two runs that differ only in --rows (LARGE 64x the state of SMALL or more): a commit writes
      the same small state and about as many undo bytes per step in both (the per-step commit
      cost does not grow with the state: the parity ledgers live in the store, not in the slot).
  timeline RUN
      the report's timeline is consistent: a step timed end to end (`follows`) directly follows the
      entry before it and `step_s` is its end minus that entry's end (never less than its own `dt`),
      every other step's `step_s` is its `dt`; the first entry, and the first one after each
      failure, does not follow; `throughput` adds up the `step_s` of its steps; each emulated ec
      failure that was rebuilt shows its step as degraded (phases survive a relaunch whose root
      rank was itself a replacement).
  make-tsv PATH LINES
      writes a small Criteo-format TSV (label, 13 integers, 26 hex categoricals; some empty).
"""
import json
import os
import re
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load(path):
    with open(path) as f:
        return json.load(f)


def compare(args):
    ref, run = load(args[0]), load(args[1])
    outcome, nfail = None, None
    if "--outcome" in args:
        outcome = args[args.index("--outcome") + 1]
    if "--failures" in args:
        nfail = int(args[args.index("--failures") + 1])
    for key in ("world_size", "seed", "steps", "k", "m", "bottom_mlp", "top_mlp"):
        if ref.get(key) != run.get(key):
            fail(f"{key} differs: {ref.get(key)} vs {run.get(key)}")
    # --field KEY=JSON (repeatable): the run's report holds this value.
    for i, a in enumerate(args):
        if a == "--field":
            key, value = args[i + 1].split("=", 1)
            if run.get(key) != json.loads(value):
                fail(f"{key} = {run.get(key)!r}, expected {value}")
    if not ref["state_hash"] or ref["state_hash"] != run["state_hash"]:
        fail(f"state_hash {run['state_hash']} != failure-free {ref['state_hash']}")
    if run["ft"] == "ec" and run["parity_mismatches"] != 0:
        fail(f"parity_mismatches = {run['parity_mismatches']}")
    fails = run["failures"]
    if nfail is not None and len(fails) != nfail:
        fail(f"{len(fails)} failure records, expected {nfail}")
    if outcome:
        final = [f for f in fails if not f.get("superseded")]
        bad = [f for f in final if f["outcome"] != outcome]
        if bad:
            fail(f"outcomes {[f['outcome'] for f in final]}, expected {outcome}")
        for f in final:
            if f["time_to_redundancy_s"] < 0 or f["redundant_after_step"] < f["step"] - 1:
                fail(f"failure record without a recovery: {f}")
    if len(run["timeline"]["step"]) < run["steps"] - (run["resumed_from"] or 0):
        fail("timeline shorter than the run")
    check_timeline(run)
    print(f"ok: state_hash {run['state_hash']} == reference; {len(fails)} failures: "
          + ", ".join(f"rank {f['rank']}@{f['step']} {f['outcome']} in {f['time_to_redundancy_s']:.3f}s" for f in fails))


def check_timeline(run):
    tl = run["timeline"]
    rows = list(zip(tl["step"], tl["t"], tl["dt"], tl["step_s"], tl["follows"], tl["phase"]))
    if rows and rows[0][4]:
        fail("the first timeline entry follows nothing")
    for i, (s, t, dt, step_s, follows, _) in enumerate(rows):
        if follows:
            s0, t0 = rows[i - 1][0], rows[i - 1][1]
            if s != s0 + 1 or abs(step_s - (t - t0)) > 1e-9 or step_s < dt - 1e-9:
                fail(f"entry {i} (step {s}) follows step {s0} at {t0}: t {t}, dt {dt}, step_s {step_s}")
        elif step_s != dt:
            fail(f"entry {i} (step {s}) follows nothing but step_s {step_s} != dt {dt}")
    # A step that ran and committed keeps its entry, also when a death followed its commit before
    # the entry was written (--commit in-step; a checkpoint step): steps go up by one or roll back.
    for i in range(1, len(rows)):
        if rows[i][0] > rows[i - 1][0] + 1:
            fail(f"entry {i}: step {rows[i][0]} after step {rows[i - 1][0]}: steps {rows[i - 1][0] + 1}..{rows[i][0] - 1} have no entry")
    for f in run["failures"]:
        after = [r for r in rows if r[1] - r[2] > f["t_fail"]]
        if after and after[0][4]:
            fail(f"the first step after the failure at {f['t_fail']} ({after[0][0]}) is timed from the step before it")
        if run["ft"] == "ec" and not f["relaunch"] and f["outcome"] == "rebuilt" \
                and not any(r[0] == f["step"] and r[5] == "degraded" for r in rows):
            fail(f"step {f['step']} (after the failure of rank {f['rank']}) is not degraded in the timeline")
    total = sum(v["seconds"] for v in run["throughput"].values())
    if abs(total - sum(tl["step_s"])) > 1e-6 * max(1.0, total):
        fail(f"throughput covers {total} s, the steps {sum(tl['step_s'])} s")


def timeline(args):
    run = load(args[0])
    check_timeline(run)
    print(f"ok: {args[0]}: timeline of {len(run['timeline']['step'])} entries consistent")


def expect_exit(args):
    code, regex = int(args[0]), args[1]
    sep = args.index("--")
    opts, cmd = args[2:sep], args[sep + 1:]
    one_line = "--one-line" in opts
    repeat = int(opts[opts.index("--repeat") + 1]) if "--repeat" in opts else 1
    for i in range(repeat):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        sys.stdout.write(p.stdout)
        sys.stdout.write(p.stderr)
        if p.returncode != code:
            fail(f"run {i + 1}: exit code {p.returncode}, expected {code}")
        if not re.search(regex, p.stderr):
            fail(f"run {i + 1}: stderr does not match {regex!r}")
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        if one_line and len(lines) != 1:
            fail(f"run {i + 1}: stderr holds {len(lines)} lines, expected exactly one")
        if "--no-segments" in opts:
            job = opts[opts.index("--no-segments") + 1]
            left = [n for n in os.listdir("/dev/shm") if n.startswith(f"resil-ec-{job}-")]
            if left:
                fail(f"run {i + 1}: state segments left behind: {left}")
    print(f"ok: exit {code}, stderr matches" + (", one line" if one_line else "") + (f", {repeat} runs" if repeat > 1 else ""))


def preempt(args):
    ref, cmd = load(args[0]), args[2:]
    report = cmd[cmd.index("--report") + 1]
    ckpt_dir = cmd[cmd.index("--ckpt-dir") + 1]
    subprocess.run(["rm", "-rf", ckpt_dir, report], check=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode != 75:
        fail(f"first run exited {p.returncode}, expected 75 (preempted)")
    first = load(report)
    if not first["preempted"] or first["state_hash"] is not None:
        fail("first report does not say preempted")
    # Without --signal-at (a fresh run would be preempted again): a run of other settings in the same
    # --ckpt-dir is not refused and does not resume another configuration's checkpoint.
    fresh = [a for i, a in enumerate(cmd) if a != "--signal-at" and (i == 0 or cmd[i - 1] != "--signal-at")]
    p = subprocess.run(fresh + ["--lr", "0.1"], capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode != 0 or "not resuming from the preemption checkpoint" not in p.stdout or load(report)["resumed_from"] is not None:
        fail(f"a run with other settings exited {p.returncode} or resumed the preemption checkpoint")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    if p.returncode != 0:
        fail(f"resumed run exited {p.returncode}")
    run = load(report)
    if run["resumed_from"] is None:
        fail("second run did not resume")
    if run["state_hash"] != ref["state_hash"]:
        fail(f"resumed state_hash {run['state_hash']} != uninterrupted {ref['state_hash']}")
    # Completed: the preemption checkpoint is retired; the same run again starts afresh.
    p = subprocess.run(fresh, capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    again = load(report)
    if p.returncode != 0 or "resuming from" in p.stdout or again["resumed_from"] is not None:
        fail(f"after completion the run resumed the preemption checkpoint again (exit {p.returncode})")
    if again["state_hash"] != ref["state_hash"]:
        fail(f"fresh state_hash {again['state_hash']} != {ref['state_hash']}")
    print(f"ok: preempted, resumed from step {run['resumed_from']}, state_hash equal; other settings not refused; retired after completion")


def plot(args):
    run, png = args
    script = os.path.join(os.environ["RESIL_SOURCE_DIR"], "scripts", "plot_ec_timeline.py")
    if os.path.exists(png):
        os.remove(png)
    subprocess.run([os.environ.get("PYTHON", "/usr/bin/python3"), script, run, png], check=True, timeout=120)
    with open(png, "rb") as f:
        head = f.read(8)
    if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
        fail(f"{png} is not a plausible PNG")
    print(f"ok: {png} ({os.path.getsize(png)} bytes)")


def commit_cost(args):
    small, large = load(args[0]), load(args[1])
    if large["rows"] < 64 * small["rows"]:
        fail(f"LARGE has {large['rows']} rows, not 64x SMALL's {small['rows']}")
    a, b = small["commit"], large["commit"]
    if not a or not b:
        fail("a report has no commit figures (run with a segment: --job-id)")
    if a["small_state_bytes"] != b["small_state_bytes"]:
        fail(f"small state {a['small_state_bytes']} bytes at {small['rows']} rows, {b['small_state_bytes']} at {large['rows']}")
    # The same batch size: about as many rows per step at both sizes (which rows repeat differs).
    if not 0.5 * a["undo_bytes_max"] <= b["undo_bytes_max"] <= 2 * a["undo_bytes_max"]:
        fail(f"undo bytes per step {a['undo_bytes_max']} at {small['rows']} rows, {b['undo_bytes_max']} at {large['rows']}")
    print(f"ok: small state {a['small_state_bytes']} bytes at both sizes; undo per step {a['undo_bytes_max']} / {b['undo_bytes_max']} bytes")


def make_tsv(args):
    path, lines = args[0], int(args[1])
    x = 12345
    with open(path, "w") as f:
        for i in range(lines):
            fields = []
            for j in range(40):
                x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
                v = x >> 33
                if j == 0:
                    fields.append(str(v % 2))
                elif (v % 17) == 0:
                    fields.append("")  # missing
                elif j <= 13:
                    fields.append(str(v % 1000))
                else:
                    fields.append(format(v % 5000, "08x"))
            f.write("\t".join(fields) + "\n")
    print(f"ok: wrote {lines} lines to {path}")


if __name__ == "__main__":
    cmds = {"compare": compare, "expect-exit": expect_exit, "preempt": preempt, "plot": plot, "make-tsv": make_tsv, "commit-cost": commit_cost,
            "timeline": timeline}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        fail(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])
