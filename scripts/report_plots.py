#!/usr/bin/python3
"""Plots for ckpt-flip campaign reports (matplotlib, Agg).

  report_plots.py REPORT.json OUTDIR
      per-class rates, per-bit sensitivity, model vs optimizer, per field (PNG, with Clopper-Pearson
      error bars); prints the file names written (ckpt-flip report --markdown embeds them).
  report_plots.py --compare OUT.png LABEL=REPORT.json [LABEL=REPORT.json ...] [--by role|field|bit] [--group sdc|due]
      one panel per stratum value, a bar per report (e.g. dp vs mp), with intervals; --by bit: points
      per bit position, one series per report.

Errors are one line (cli_errors.py): exit 2 a bad command line, 3 a file that cannot be read or
written (OUTDIR or OUT.png's directory must exist), 4 a file that is not a ckpt-flip report.
"""
import os
import sys

from cli_errors import die, load_json, malformed, require_dir

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def bars(ax, labels, rates, title, ylabel="rate"):
    ps = [r["p"] for r in rates]
    lo = [max(0.0, r["p"] - r["clopper_pearson"][0]) for r in rates]
    hi = [max(0.0, r["clopper_pearson"][1] - r["p"]) for r in rates]
    ax.bar(range(len(labels)), ps, yerr=[lo, hi], capsize=3, color="tab:blue", alpha=0.8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)


REPORT_KEYS = ("campaign", "overall", "by", "trials")
WHAT = "a ckpt-flip report (ckpt-flip report --json)"


def single(report_path, outdir):
    rep = load_json(report_path, WHAT, REPORT_KEYS)
    require_dir(outdir, "OUTDIR")
    malformed(report_path, "report", draw_single, rep, outdir)


def draw_single(rep, outdir):
    name = rep["campaign"].get("name", "campaign")
    conf = rep.get("confidence", 0.95)
    written = []

    fig, ax = plt.subplots(figsize=(7, 3.5))
    cls = rep["overall"]["classes"]
    bars(ax, list(cls), list(cls.values()), f"{name}: outcome classes ({rep['trials']['done']} trials, {int(conf * 100)}% CP)")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "plot-classes.png"), dpi=90)
    plt.close(fig)
    written.append("plot-classes.png")

    bits = {int(k): v for k, v in rep["by"].get("bit", {}).items() if v["n"] > 0}
    if bits:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        xs = sorted(bits)
        for group, colour, off in (("sdc", "tab:red", -0.2), ("due", "tab:gray", 0.2)):
            rs = [bits[b]["groups"][group] for b in xs]
            ax.errorbar([x + off for x in xs], [r["p"] for r in rs],
                        yerr=[[r["p"] - r["clopper_pearson"][0] for r in rs], [r["clopper_pearson"][1] - r["p"] for r in rs]],
                        fmt="o", ms=3, capsize=2, color=colour, label=group.upper())
        ax.set_xlabel("bit position (0 = LSB)")
        ax.set_ylabel("P(outcome | bit)")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
        ax.set_title(f"{name}: per-bit sensitivity", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "plot-bits.png"), dpi=90)
        plt.close(fig)
        written.append("plot-bits.png")

    for dim in ("role", "field"):
        d = {k: v for k, v in rep["by"].get(dim, {}).items() if v["n"] > 0}
        if not d:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
        for ax, group in zip(axes, ("sdc", "due")):
            bars(ax, list(d), [v["groups"][group] for v in d.values()], f"{group.upper()} by {dim}")
        fig.suptitle(name, fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, f"plot-{dim}.png"), dpi=90)
        plt.close(fig)
        written.append(f"plot-{dim}.png")
    for w in written:
        print(w)


def compare_bits(out_png, reps, group):
    """Per-bit rates of several reports (e.g. dp vs mp) as points with intervals, bit 0..31 left to right."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, rep) in enumerate(reps):
        bits = {int(k): v for k, v in rep["by"].get("bit", {}).items() if v["n"] > 0}
        xs = sorted(bits)
        rs = [bits[b]["groups"][group] for b in xs]
        off = (i - (len(reps) - 1) / 2) * 0.25
        ax.errorbar([x + off for x in xs], [r["p"] for r in rs],
                    yerr=[[r["p"] - r["clopper_pearson"][0] for r in rs], [r["clopper_pearson"][1] - r["p"] for r in rs]],
                    fmt="o", ms=3, capsize=2, color=colours[i % len(colours)], label=f"{label} (n/bit {min((bits[b]['n'] for b in xs), default=0)})")
    ax.set_xlabel("bit position (0 = mantissa LSB, 23-30 exponent, 31 sign)")
    ax.set_ylabel(f"P({group.upper()} | bit)")
    ax.set_ylim(0, 1)
    ax.set_xticks(range(32))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlim(-0.7, 31.7)
    ax.legend(fontsize=7)
    ax.set_title(f"{group.upper()} per bit position (95% Clopper-Pearson)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)
    plt.close(fig)
    print(os.path.basename(out_png))


def compare(out_png, pairs, by, group):
    reps = [(label, load_json(path, WHAT, REPORT_KEYS)) for label, path in pairs]
    require_dir(os.path.dirname(out_png), "the directory of OUT.png")
    paths = ", ".join(path for _, path in pairs)
    if by == "bit":
        return malformed(paths, "report", compare_bits, out_png, reps, group)
    return malformed(paths, "report", compare_strata, out_png, reps, by, group)


def compare_strata(out_png, reps, by, group):
    keys = []
    for _, rep in reps:
        for k, v in rep["by"].get(by, {}).items():
            if v["n"] > 0 and k not in keys:
                keys.append(k)
    keys = keys or ["all"]
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(keys) * len(reps) / 2), 3.6))
    width = 0.8 / len(reps)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, rep) in enumerate(reps):
        rs = []
        for k in keys:
            v = rep["by"].get(by, {}).get(k)
            rs.append(v["groups"][group] if v and v["n"] > 0 else rep["overall"]["groups"][group] if k == "all" else None)
        xs = [j + (i - (len(reps) - 1) / 2) * width for j in range(len(keys))]
        p = [r["p"] if r else 0 for r in rs]
        err = [[r["p"] - r["clopper_pearson"][0] if r else 0 for r in rs], [r["clopper_pearson"][1] - r["p"] if r else 0 for r in rs]]
        ax.bar(xs, p, width=width, yerr=err, capsize=3, label=label, color=colours[i % len(colours)], alpha=0.85)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(keys)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"P({group.upper()})")
    ax.set_title(f"{group.upper()} by {by} (95% Clopper-Pearson)", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)
    plt.close(fig)
    print(os.path.basename(out_png))


def main(argv):
    if len(argv) >= 3 and argv[0] == "--compare":
        out_png, rest = argv[1], argv[2:]
        by, group, pairs = "role", "sdc", []
        i = 0
        while i < len(rest):
            if rest[i] in ("--by", "--group"):
                choices = ("role", "field", "bit") if rest[i] == "--by" else ("sdc", "due")
                if i + 1 >= len(rest) or rest[i + 1] not in choices:
                    die(2, f"{rest[i]} takes one of {', '.join(choices)}")
                if rest[i] == "--by":
                    by = rest[i + 1]
                else:
                    group = rest[i + 1]
                i += 2
            else:
                label, eq, path = rest[i].partition("=")
                if not eq or not label or not path:
                    die(2, f"'{rest[i]}': give LABEL=REPORT.json")
                pairs.append((label, path))
                i += 1
        if not pairs:
            die(2, "--compare needs at least one LABEL=REPORT.json")
        compare(out_png, pairs, by, group)
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    single(argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
