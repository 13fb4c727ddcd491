#!/usr/bin/python3
"""Plot an ec-train report: step throughput against the step number and against wall time,
with failures (vertical lines) and recoveries (shaded: degraded reads + rebuild for --ft ec,
rollback + redo for --ft ckpt) marked.

usage: /usr/bin/python3 scripts/plot_ec_timeline.py REPORT.json OUT.png [--title TEXT]

Errors are one line (cli_errors.py): exit 2 a bad command line, 3 a file that cannot be read or
written (OUT.png's directory must exist), 4 a file that is not an ec-train report.
"""
import os
import sys

from cli_errors import die, load_json, malformed, require_dir

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"normal": "tab:blue", "degraded": "tab:orange", "redo": "tab:red"}


def smooth(values, width=5):
    out = []
    for i in range(len(values)):
        lo = max(0, i - width + 1)
        out.append(sum(values[lo:i + 1]) / (i + 1 - lo))
    return out


def main(argv):
    args = argv[1:]
    title = None
    if "--title" in args:
        i = args.index("--title")
        if i + 1 >= len(args):
            die(2, "--title needs a value")
        title = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    rep = load_json(args[0], "an ec-train report (ec-train --report)", ("timeline", "failures", "batch"))
    require_dir(os.path.dirname(args[1]), "the directory of OUT.png")
    malformed(args[0], "ec-train report", plot, rep, args[0], args[1], title)


def plot(rep, path, out, title):
    tl = rep["timeline"]
    # step_s: each step end to end (reports before it have only dt, the step's own work).
    steps, t, dt, phase = tl["step"], tl["t"], tl.get("step_s", tl["dt"]), tl["phase"]
    if not steps:
        die(4, f"{path}: the report has no steps")
    if not len(t) == len(dt) == len(phase) == len(steps):
        die(4, f"{path}: the timeline's lists differ in length (step {len(steps)}, t {len(t)}, step times {len(dt)}, phase {len(phase)})")
    thr = [rep["batch"] / d if d > 0 else 0.0 for d in dt]

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7))
    for ph, color in COLORS.items():
        xs = [s for s, p in zip(steps, phase) if p == ph]
        ys = [y for y, p in zip(thr, phase) if p == ph]
        if xs:
            ax1.scatter(xs, ys, s=6, color=color, label=ph)
        ts = [x for x, p in zip(t, phase) if p == ph]
        if ts:
            ax2.scatter(ts, ys, s=6, color=color, label=ph)
    ax2.plot(t, smooth(thr), color="gray", linewidth=1, label="5-step mean")

    at_step = {}
    for f in rep["failures"]:
        at_step.setdefault(f["step"], []).append(str(f["rank"]))
    for step, ranks in at_step.items():
        lbl = ("ranks " if len(ranks) > 1 else "rank ") + ",".join(ranks) + " fail" + ("" if len(ranks) > 1 else "s")
        ax1.axvline(step, color="black", linestyle="--", linewidth=1)
        ax1.annotate(lbl, (step, 0), xytext=(3, 5), textcoords="offset points", fontsize=8, rotation=90)
    for f in rep["failures"]:
        ax2.axvline(f["t_fail"], color="black", linestyle="--", linewidth=1)
        if f["time_to_redundancy_s"] >= 0:
            kind = "rebuild" if "rebuild_s" in f else "rollback + redo"
            ax2.axvspan(f["t_fail"], f["t_fail"] + f["time_to_redundancy_s"], color="orange" if kind == "rebuild" else "red",
                        alpha=0.12)
            if f["redundant_after_step"] >= 0:
                ax1.axvspan(f["step"], f["redundant_after_step"], color="orange" if kind == "rebuild" else "red", alpha=0.12)

    ax1.set_xlabel("step")
    ax1.set_ylabel("samples / s")
    ax2.set_xlabel("wall time (s)")
    ax2.set_ylabel("samples / s")
    ax1.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.legend(loc="lower right", fontsize=8)
    fig.suptitle(title or f"ec-train --ft {rep['ft']}  N={rep['world_size']} k={rep['k']} m={rep['m']}  seed {rep['seed']}"
                 f"  state_hash {rep['state_hash']}")
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=110)
    except OSError as e:
        die(3, f"{out}: {e.strerror}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv)
