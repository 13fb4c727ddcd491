#!/usr/bin/python3
"""docs/results/dp-vs-mp-grid.md from the campaigns of scripts/study_dp_vs_mp.sh (tables, plots, Findings).

  study_dp_vs_mp_report.py OUT RESULTS key=value...

OUT/campaigns.tsv lists the campaigns (name model mode role point flips strata dir), each with its
report.json (ckpt-flip report --json) and results/*.jsonl. Writes RESULTS/dp-vs-mp-grid.md, the PNGs
(scripts/report_plots.py --compare) and RESULTS/dp-vs-mp-grid-results.jsonl.gz (every trial, slimmed).
Every number in the Findings section is computed here from the records; nothing is typed in.
"""
import glob
import gzip
import io
import json
import math
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HARMFUL = ("critical_sdc", "load_failure", "hang", "crash", "nan_at_load", "nan_later")  # critical SDC or DUE
DUE = ("load_failure", "hang", "crash", "nan_at_load", "nan_later")
FULL_FIELD_TRIALS, FULL_BIT_TRIALS = 300, 640  # --full: 100 per field; 20 per bit position
MIN_N, MIN_BIT_N = 100, 20  # fewer trials than this on a side of a comparison: no verdict (the intervals say nothing)
EXP_MSB = 30  # f32: bit 31 sign, 30..23 exponent (30 its most significant bit), 22..0 mantissa
SIGN_BIT = 31


def pct(p):
    return f"{100 * p:.1f}%"


def ci(iv):
    return f"[{100 * iv[0]:.1f}, {100 * iv[1]:.1f}]"


def width(iv):
    return f"{100 * (iv[1] - iv[0]):.1f}"


def _logpmf(k, n, p):
    if p <= 0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1:
        return 0.0 if k == n else -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def _cdf(k, n, p):  # P(X <= k), X ~ Binomial(n, p)
    return min(1.0, sum(math.exp(_logpmf(i, n, p)) for i in range(k + 1)))


def _bisect(f, target, increasing):
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(x, n, conf=0.95):
    """Exact binomial interval (bisection on the binomial tails; no scipy)."""
    if n == 0:
        return (0.0, 1.0)
    a = (1 - conf) / 2
    lo = 0.0 if x == 0 else _bisect(lambda p: 1 - _cdf(x - 1, n, p), a, True)
    hi = 1.0 if x == n else _bisect(lambda p: _cdf(x, n, p), a, False)
    return (lo, hi)


def fisher(x1, n1, x2, n2):
    """Two-sided Fisher exact test of x1/n1 vs x2/n2: the probability of the tables with the same margins
    that are no more likely than the observed one."""
    if n1 == 0 or n2 == 0:
        return 1.0
    k, n = x1 + x2, n1 + n2
    lc = lambda a, b: math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)
    lp = lambda a: lc(n1, a) + lc(n2, k - a) - lc(n, k)
    l0 = lp(x1)
    return min(1.0, sum(math.exp(lp(a)) for a in range(max(0, k - n2), min(k, n1) + 1) if lp(a) <= l0 + 1e-7))


def load(out):
    camps = []
    for line in open(os.path.join(out, "campaigns.tsv")):
        name, model, mode, role, point, flips, strata, d = line.rstrip("\n").split("\t")
        recs = []
        for f in sorted(glob.glob(os.path.join(d, "results", "*.jsonl"))):
            for ln in open(f):
                ln = ln.strip()
                if ln:
                    try:
                        recs.append(json.loads(ln))
                    except json.JSONDecodeError:
                        pass  # a torn last line: that trial runs again
        recs.sort(key=lambda r: r["trial"])
        camps.append(dict(name=name, model=model, mode=mode, role=role, point=point, flips=int(flips), strata=strata, dir=d,
                          report=json.load(open(os.path.join(d, "report.json"))), recs=recs))
    return camps


def count(recs, classes, pred=lambda r: True):
    sel = [r for r in recs if pred(r)]
    return sum(r["class"] in classes for r in sel), len(sel)


def cmp_line(label_a, xa, na, label_b, xb, nb):
    p = fisher(xa, na, xb, nb)
    ia, ib = clopper_pearson(xa, na), clopper_pearson(xb, nb)
    overlap = not (ia[1] < ib[0] or ib[1] < ia[0])
    sig = p < 0.05
    return (f"{label_a} {xa}/{na} = {pct(xa / na if na else 0)} {ci(ia)} vs {label_b} {xb}/{nb} = {pct(xb / nb if nb else 0)} {ci(ib)}: "
            f"Fisher p = {p:.3g}{' (significant at 5%)' if sig else ''}, intervals {'overlap' if overlap else 'do not overlap'}"), p, xa / na if na else 0, xb / nb if nb else 0


def sites(r):
    return [(f["dataset"], f["index"], f["bit"]) for f in r.get("flips", [])]


def paired(recs_a, recs_b):
    """The trials of two campaigns matched by trial id, when every matched trial flipped the same
    (tensor, index, bit) sites in both (the sampling depends on the seed, the trial and the fault
    space's shape only); None when they did not."""
    a, b = {r["trial"]: r for r in recs_a}, {r["trial"]: r for r in recs_b}
    common = sorted(set(a) & set(b))
    if not common or any(sites(a[t]) != sites(b[t]) for t in common):
        return None
    return [(a[t], b[t]) for t in common]


def mcnemar(b, c):
    """Exact two-sided McNemar test on the discordant pairs: b (only the first), c (only the second)."""
    return 1.0 if b + c == 0 else min(1.0, 2 * _cdf(min(b, c), b + c, 0.5))


def compare(label_a, recs_a, label_b, recs_b, classes):
    """One comparison line: paired (exact McNemar) when both campaigns flipped the same sites, else Fisher."""
    pairs = paired(recs_a, recs_b)
    if pairs is None:
        xa, na = count(recs_a, classes)
        xb, nb = count(recs_b, classes)
        line, p, ra, rb = cmp_line(label_a, xa, na, label_b, xb, nb)
        return line + " (independent samples)", p, ra - rb
    n = len(pairs)
    xa = sum(ra["class"] in classes for ra, _ in pairs)
    xb = sum(rb["class"] in classes for _, rb in pairs)
    only_a = sum(ra["class"] in classes and rb["class"] not in classes for ra, rb in pairs)
    only_b = sum(rb["class"] in classes and ra["class"] not in classes for ra, rb in pairs)
    p = mcnemar(only_a, only_b)
    ia, ib = clopper_pearson(xa, n), clopper_pearson(xb, n)
    return (f"{label_a} {xa}/{n} = {pct(xa / n)} {ci(ia)} vs {label_b} {xb}/{n} = {pct(xb / n)} {ci(ib)}, paired on the same "
            f"{n} sites: {only_a} only {label_a}, {only_b} only {label_b}; exact McNemar p = {p:.3g}"
            f"{' (significant at 5%)' if p < 0.05 else ''}"), p, xa - xb


class Tally:
    """Per outcome group: pairs compared, and those significant at 5% with a (or b) higher."""

    def __init__(self, a, b):
        self.a, self.b, self.t = a, b, {}

    def add(self, grp, p, diff):
        t = self.t.setdefault(grp, [0, 0, 0])
        t[0] += 1
        t[1] += p < 0.05 and diff > 0
        t[2] += p < 0.05 and diff < 0

    def said(self, grp):
        n, a_hi, b_hi = self.t[grp]
        if not a_hi and not b_hi:
            return f"in none of {n} pair(s)"
        return (f"in {a_hi + b_hi} of {n} pair(s)" + (f", {self.a} more often in {a_hi}" if a_hi else "") +
                (f", {self.b} more often in {b_hi}" if b_hi else ""))


def partner(camps, c, **want):
    """The campaign that differs from c only in the fields of `want` (set to those values): c's
    counterpart for a comparison (its optimizer, mp, late twin), or None."""
    keys = ("model", "mode", "role", "point", "flips", "strata")
    return next((d for d in camps if all(d[k] == want.get(k, c[k]) for k in keys)), None)


def full_grid():
    """The campaign names of `study_dp_vs_mp.sh --full` (its defaults): what a complete study holds."""
    names = []
    for m in ("mlp", "cnn"):
        for mode in ("dp", "mp"):
            names += [f"{m}-{mode}-{role}-{point}-f1" for role in ("model", "optimizer") for point in ("early", "late")]
            names += [f"{m}-{mode}-model-late-f{n}" for n in (10, 100)]
            if m == "mlp":
                names.append(f"{m}-{mode}-model-late-bits")
    return names


def golden_numeric(d):
    """The numeric configuration a golden run's summary names; runs from before it was recorded used OpenBLAS."""
    try:
        n = json.load(open(os.path.join(d, "golden-train.json"))).get("numeric")
    except (OSError, ValueError):
        n = None
    return f"`{n['id']}`" if isinstance(n, dict) and "id" in n else "`blas-openblas` (not recorded)"


def machine_load(out):
    """What else ran on the machine: the load average as each invocation started (recorded by the script)."""
    path = os.path.join(out, "start-load")
    if not os.path.exists(path):
        return ""
    loads = open(path).read().split()
    return f"; 1-minute load average as each invocation started, before its own processes: {', '.join(loads)}"


def main(argv):
    out, results = argv[0], argv[1]
    params = dict(a.split("=", 1) for a in argv[2:])
    camps = load(out)
    L = []
    models = []
    for c in camps:
        if c["model"] not in models:
            models.append(c["model"])
    secs = sum(int(x) for x in open(os.path.join(out, "wall-seconds")).read().split())
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), platform.machine())
    ntrials = sum(len(c["recs"]) for c in camps)
    L += ["# dp vs mp, the field-stratified grid: checkpoint bit-flip sensitivity (Fashion-MNIST)", "",
          f"Generated by `scripts/study_dp_vs_mp.sh{' --full' if params.get('full') == '1' else ''}` "
          f"(`scripts/study_dp_vs_mp_report.py` computes every number below from the trial records). "
          f"{len(camps)} campaigns, {ntrials} trials; {params['ranks']} ranks (dp) / stages (mp); golden runs of {params['epochs']} epochs, "
          f"each trial resumes to epoch {params['epochs']} under `mpiexec -n {params['ranks']}`; test limit {params['test_limit']}; "
          f"seed {params['seed']}; `ckpt-flip campaign --jobs {params['jobs']}`. "
          f"Wall time of the run(s) that wrote this file: {secs} s ({secs / 3600:.2f} h, summed over {len(open(os.path.join(out, 'wall-seconds')).read().split())} "
          f"invocation(s)) on {os.cpu_count()} cores ({cpu}){machine_load(out)}.", ""]
    # Below --full's sizes: say so first, from the records themselves.
    short = [f"{c['name']} ({len(c['recs'])})" for c in camps
             if len(c["recs"]) < (FULL_FIELD_TRIALS if c["strata"] == "field" else FULL_BIT_TRIALS)]
    have = {c["name"] for c in camps}
    missing = [n for n in full_grid() if n not in have]
    if short or missing:
        parts = []
        if short:
            parts.append(f"{len(short)} of the {len(camps)} campaigns run have fewer than {FULL_FIELD_TRIALS} trials (field) or "
                         f"{FULL_BIT_TRIALS} (bit): {', '.join(short[:6])}{f' and {len(short) - 6} more' if len(short) > 6 else ''}")
        if missing:
            parts.append(f"{len(missing)} of the {len(full_grid())} campaigns of `--full` have not run yet: "
                         f"{', '.join(missing[:8])}{f' and {len(missing) - 8} more' if len(missing) > 8 else ''}")
        L += ["**Partial run, not the study's full grid:** " + "; ".join(parts) +
              ". Intervals and verdicts below are only what these trials support. The full study is "
              "`scripts/study_dp_vs_mp.sh --full` (docs/guide/campaigns.md, \"The earlier field-stratified grid\").", ""]
    L += ["Outcomes are classified against the golden resume of the same checkpoint: **critical SDC** = test accuracy more than 1 "
          "point below golden, **SDC** = any change of the test accuracy (critical or not), **DUE** = load failure, crash, hang or "
          "NaN/Inf. Intervals: 95% Clopper-Pearson. Field campaigns allocate trials equally to sign / exponent / mantissa (each "
          "flip of a multi-flip trial lies in the trial's field); *reweighted* rates weight each field by its share of the stored "
          "bits (f32: 1/32, 8/32, 23/32), i.e. they estimate the rate for a flip anywhere in the state.", ""]

    # Golden runs.
    L += ["## Golden runs", "", "| model | mode | recipe (`ckpt-train train` options) | test acc per epoch (test limit) | final, all 10,000 test images | train wall | numeric configuration |",
          "|---|---|---|---|---:|---:|---|"]
    for m in models:
        for mode in ("dp", "mp"):
            d = os.path.join(out, f"{m}-{mode}")
            if not os.path.isdir(d):
                continue
            accs = [json.loads(ln)["test_accuracy"] for ln in open(os.path.join(d, "golden-metrics.jsonl")) if ln.strip()]
            full = json.load(open(os.path.join(d, "golden-eval-full.json")))["test_accuracy"]
            tsec = open(os.path.join(d, "train-seconds")).read().strip()
            rec = open(os.path.join(d, "recipe")).read().strip()
            L.append(f"| {m} | {mode} | `{rec}` | {' '.join(f'{100 * a:.2f}' for a in accs)} | {100 * full:.2f}% | {tsec} s | "
                     f"{golden_numeric(d)} |")
    L += ["", "The numeric configuration decides the bits of a golden run besides its seed and world size "
          "(docs/design/determinism.md): `blas-openblas` runs were computed with OpenBLAS, whose kernel depends on the CPU, and "
          "reproduce bit for bit only where OpenBLAS picks the same kernel; `cpu-fma-seqk-1` runs reproduce on any x86-64 CPU.", ""]

    # Per campaign.
    L += ["## Campaigns", "", "Per campaign: reweighted SDC and DUE (field campaigns) or unweighted (bit campaigns), 95% CP interval "
          "and its width in points.", "",
          "| campaign | flips/trial | trials | golden acc | SDC | SDC CP (width) | DUE | DUE CP (width) | critical SDC | masked |",
          "|---|---:|---:|---:|---:|---|---:|---|---:|---:|"]
    for c in camps:
        r = c["report"]
        g = r["golden"]["metric"] if r.get("golden") else float("nan")
        if c["strata"] == "field":
            s, d = r["reweighted"]["field"]["groups"]["sdc"], r["reweighted"]["field"]["groups"]["due"]
        else:
            s, d = r["overall"]["groups"]["sdc"], r["overall"]["groups"]["due"]
        cls = r["overall"]["classes"]
        L.append(f"| {c['name']} | {c['flips']} | {r['trials']['done']} | {g:.4f} | {pct(s['p'])} | {ci(s['clopper_pearson'])} ({width(s['clopper_pearson'])}) | "
                 f"{pct(d['p'])} | {ci(d['clopper_pearson'])} ({width(d['clopper_pearson'])}) | {cls['critical_sdc']['x']} | "
                 f"{cls['masked']['x'] + cls['bit_masked']['x']} |")
    L += ["", "## Per field", "", "Per stratum, unweighted; `width` = CP interval width in points.", "",
          "| campaign | field | n | SDC | SDC CP | width | DUE | DUE CP | width | classes |", "|---|---|---:|---:|---|---:|---:|---|---:|---|"]
    widths = []
    for c in camps:
        if c["strata"] != "field":
            continue
        for f, v in c["report"]["by"]["field"].items():
            if v["n"] == 0:
                continue
            s, d = v["groups"]["sdc"], v["groups"]["due"]
            widths.append(s["clopper_pearson"][1] - s["clopper_pearson"][0])
            cl = ", ".join(f"{k} {n}" for k, n in sorted(v["classes"].items()) if n)
            L.append(f"| {c['name']} | {f} | {v['n']} | {pct(s['p'])} | {ci(s['clopper_pearson'])} | {width(s['clopper_pearson'])} | "
                     f"{pct(d['p'])} | {ci(d['clopper_pearson'])} | {width(d['clopper_pearson'])} | {cl} |")
    if widths:
        L += ["", f"Per-field SDC interval widths: median {100 * sorted(widths)[len(widths) // 2]:.1f} points, widest {100 * max(widths):.1f} points."]

    # Plots.
    L += ["", "## Plots", ""]
    plots = os.path.join(HERE, "report_plots.py")
    for old in glob.glob(os.path.join(results, "dp-vs-mp-grid-*.png")):
        os.remove(old)  # plots of an earlier run's campaigns that this one may not have
    for m in models:
        fc = [c for c in camps if c["model"] == m and c["strata"] == "field" and c["flips"] == 1]
        for group in ("sdc", "due"):
            png = f"dp-vs-mp-grid-{m}-{group}.png"
            if fc:
                subprocess.run([sys.executable, plots, "--compare", os.path.join(results, png), "--by", "field", "--group", group] +
                               [f"{c['mode']} {c['role']} {c['point']}={c['dir']}/report.json" for c in fc], check=True, stdout=subprocess.DEVNULL)
                L += [f"![{m} {group.upper()} by field, 1 flip per trial](dp-vs-mp-grid-{m}-{group}.png)", ""]
        bc = [c for c in camps if c["model"] == m and c["strata"] == "bit"]
        for group in ("sdc", "due"):
            if bc:
                png = f"dp-vs-mp-grid-{m}-bits-{group}.png"
                subprocess.run([sys.executable, plots, "--compare", os.path.join(results, png), "--by", "bit", "--group", group] +
                               [f"{c['mode']} {c['point']}={c['dir']}/report.json" for c in bc], check=True, stdout=subprocess.DEVNULL)
                L += [f"![{m} {group.upper()} per bit position, model state](dp-vs-mp-grid-{m}-bits-{group}.png)", ""]

    # Findings.
    L += ["## Findings", "",
          "Each claim of the seed studies (Rojas, Pérez, Meneses et al.: CLUSTER 2021, SBAC-PAD 2022, JPDC 2024), "
          "resil's numbers, and a verdict computed by the rules given with each. Differences are tested with the two-sided Fisher "
          "exact test (a two-proportion test exact for small counts) at 5%, without correction for the number of comparisons "
          "(read isolated p-values near 0.05 accordingly); the intervals are 95% Clopper-Pearson. *Harmful* = critical SDC or DUE.", ""]

    # 1. Flips absorbed unless the exponent's MSB is hit.
    L += ["### 1. Models absorb dozens of flips with little effect unless a crucial bit (the exponent's MSB) is hit", ""]
    hit = lambda r: any(f.get("bit") == EXP_MSB for f in r.get("flips", []))
    rows, verdicts = [], []
    for c in camps:
        if c["strata"] != "field" or c["role"] != "model":
            continue
        xa, na = count(c["recs"], HARMFUL, lambda r: not hit(r))
        xb, nb = count(c["recs"], HARMFUL, hit)
        ia = clopper_pearson(xa, na)
        p = fisher(xb, nb, xa, na) if na and nb else float("nan")
        rows.append(f"| {c['name']} | {c['flips']} | {xa}/{na} = {pct(xa / na if na else 0)} {ci(ia)} | "
                    f"{xb}/{nb} = {pct(xb / nb if nb else 0)} {ci(clopper_pearson(xb, nb))} | {'n/a' if math.isnan(p) else f'{p:.3g}'} |")
        if c["flips"] > 1:
            verdicts.append((ia[1] <= 0.05, p < 0.05 and xb / nb > xa / na) if na >= MIN_N and nb >= MIN_BIT_N else None)
    L += ["Model-state field campaigns, trials split by whether any of their flips hit bit 30 (the f32 exponent's most "
          "significant bit; a flip there multiplies or divides a value by 2^128):", "",
          "| campaign | flips/trial | harmful, no flip on bit 30 | harmful, a flip on bit 30 | Fisher p |", "|---|---:|---|---|---:|"] + rows + [""]
    bits = [c for c in camps if c["strata"] == "bit"]
    for c in bits:
        x30, n30 = count(c["recs"], HARMFUL, lambda r: r.get("stratum") == str(EXP_MSB))
        xo, no = count(c["recs"], HARMFUL, lambda r: r.get("stratum") != str(EXP_MSB))
        line, p, _, _ = cmp_line("bit 30", x30, n30, "the other 31 bits", xo, no)
        L += [f"- {c['name']} (1 flip per trial, per bit position): harmful {line}."]
        verdicts.append((clopper_pearson(xo, no)[1] <= 0.05, p < 0.05 and x30 / n30 > xo / no) if n30 >= MIN_BIT_N and no >= MIN_N else None)
    rule = ("Rule: *reproduced* when, in every multi-flip model-state campaign and every bit campaign, trials that spare bit 30 "
            "are harmful at most 5% of the time (upper CP bound <= 5%) and trials that hit it are significantly more often harmful; "
            "*not reproduced* when neither holds anywhere; *partly* otherwise.")
    if not verdicts:
        v = "not testable here (no multi-flip model-state or bit campaign in this run)"
    elif None in verdicts:
        v = f"not testable with this run's sizes (a verdict needs >= {MIN_N} trials on each side, >= {MIN_BIT_N} on bit 30)"
    elif all(a and b for a, b in verdicts):
        v = "**reproduced**"
    elif not any(a or b for a, b in verdicts):
        v = "**not reproduced**"
    else:
        v = f"**partly reproduced** ({sum(a and b for a, b in verdicts)} of {len(verdicts)} campaigns meet both conditions)"
    L += ["", rule, "", f"Verdict: {v}.", ""]

    # 2. Model state more sensitive than optimizer state.
    L += ["### 2. The model state is more sensitive than the optimizer state", ""]
    res = []
    for c in camps:
        if c["strata"] != "field" or c["role"] != "model":
            continue
        o = partner(camps, c, role="optimizer")
        if not o:
            continue
        for grp, classes in (("SDC", ("critical_sdc", "tolerable_sdc")), ("harmful", HARMFUL)):
            xa, na = count(c["recs"], classes)
            xb, nb = count(o["recs"], classes)
            line, p, pa, pb = cmp_line("model", xa, na, "optimizer", xb, nb)
            L.append(f"- {c['model']} {c['mode']} {c['point']}, {c['flips']} flip(s), {grp}: {line}.")
            if grp == "harmful":
                res.append((p < 0.05 and pa > pb, p < 0.05 and pb > pa) if min(na, nb) >= MIN_N else None)
    L += ["", "Both campaigns of a pair use the same equal allocation over the fields, so their unweighted rates estimate the "
          "same mixture and compare directly (the reweighted rates are in the campaign table).",
          "Rule: *reproduced* when the model state's harmful rate (critical SDC or DUE) is significantly higher in every pair, "
          "*not reproduced* when it is in none, *partly* otherwise; a significant difference the other way is named. The verdict "
          "uses harmful outcomes, not any SDC: a trial resumes a whole epoch or two of training, and training amplifies almost any "
          "perturbation that survives the first step into a final accuracy that differs by a few test images (tolerable SDC), so "
          "\"any change\" mostly measures whether a flip was masked at once.", ""]
    if not res:
        v = "not testable here (no model/optimizer pair in this run)"
    elif None in res:
        v = f"not testable with this run's sizes (a verdict needs >= {MIN_N} trials per campaign)"
    elif all(a for a, _ in res):
        v = "**reproduced**"
    elif not any(a for a, _ in res):
        v = "**not reproduced**"
    else:
        v = f"**partly reproduced** (model > optimizer significantly in {sum(a for a, _ in res)} of {len(res)} pairs)"
    if None not in res and any(b for _, b in res):
        v += f"; the optimizer state is significantly more sensitive in {sum(b for _, b in res)} pair(s)"
    L += [f"Verdict: {v}.", ""]
    # Where the optimizer state's harm comes from: Adam's second moment is never negative, and its
    # update divides by sqrt(v) + eps, so a sign flip there is NaN at the next step.
    sq_sign = lambda r: any(f.get("dataset", "").endswith("exp_avg_sq") and f.get("bit") == SIGN_BIT for f in r.get("flips", []))
    opt = [c for c in camps if c["strata"] == "field" and c["role"] == "optimizer"]
    if opt:
        L += ["Where the optimizer state's harm comes from, from the same records: trials with a flip of the sign bit of "
              "Adam's second moment (`exp_avg_sq`, never negative; the update divides by its square root) against all "
              "other trials of the campaign:", ""]
        higher, pairs = 0, 0
        for c in opt:
            xa, na = count(c["recs"], HARMFUL, sq_sign)
            xb, nb = count(c["recs"], HARMFUL, lambda r: not sq_sign(r))
            xn, _ = count(c["recs"], ("nan_later",), sq_sign)
            line = (f"- {c['name']}: harmful {xa}/{na} with such a flip ({xn} of them NaN later), "
                    f"{xb}/{nb} = {pct(xb / nb if nb else 0)} {ci(clopper_pearson(xb, nb))} without")
            mo = partner(camps, c, role="model")
            if mo and nb:
                xm, nm = count(mo["recs"], HARMFUL)
                p = fisher(xb, nb, xm, nm)
                pairs += 1
                higher += p < 0.05 and xb / nb > xm / nm
                line += f"; the model state: {xm}/{nm} = {pct(xm / nm)} (Fisher p = {p:.3g})"
            L.append(line + ".")
        L += ["", "A sign flip of a second-moment value makes it negative and the next Adam step NaN (unless the value was 0: "
              f"the flip gives -0). Without those trials the optimizer state is significantly more harmful than the model "
              f"state in {higher} of {pairs} pair(s). So the verdict above comes from Adam's state holding a value whose sign "
              "is never legitimately negative: an optimizer without such a value (plain SGD, SGD with momentum) has no flip "
              "of this kind. Compare claim 2 with the seed studies only with their optimizer in mind.", ""]

    # 3. dp vs mp.
    L += ["### 3. Data-parallel vs model-parallel training", "",
          "The seed studies compare dp with mp training; resil runs the same campaign (fields, role, point, flip count, seed) on "
          "the dp and the mp checkpoint of the same model and recipe. Trial t draws its sites from the seed, the trial and the "
          "fault space's shape only, and the dp checkpoint (one file) and the mp one (four stage files) hold the same tensors: so "
          "trial t flips the same tensor, index and bit in both (checked from the records for every pair below). The comparison "
          "is therefore paired: the same fault, under the other kind of parallelism (the flipped values differ only in their last "
          "bits, where the dp and mp trajectories round differently), tested with the exact McNemar test on the trials whose "
          "outcome differs; a pair of campaigns that did not hit the same sites would be compared as independent samples (Fisher) "
          "and marked so:", ""]
    nsig, ntot = 0, 0
    tally = Tally("dp", "mp")
    for c in camps:
        if c["mode"] != "dp":
            continue
        m = partner(camps, c, mode="mp")
        if not m:
            continue
        for grp, classes in (("SDC", ("critical_sdc", "tolerable_sdc")), ("DUE", DUE), ("critical SDC", ("critical_sdc",)),
                             ("harmful", HARMFUL)):
            line, p, diff = compare("dp", c["recs"], "mp", m["recs"], classes)
            ntot += grp != "harmful"
            nsig += grp != "harmful" and p < 0.05
            tally.add(grp, p, diff)
            L.append(f"- {c['model']} {c['role']} {c['point']}, {c['flips']} flip(s){' per bit campaign' if c['strata'] == 'bit' else ''}, {grp}: {line}.")
    L += ["", f"{nsig} of {ntot} dp-vs-mp comparisons (SDC, DUE, critical SDC) differ significantly at 5% "
          f"(about {0.05 * ntot:.1f} would by chance alone if dp and mp were equally sensitive).", ""]
    if tally.t:
        L += ["Rule: dp and mp *differ* in an outcome when the paired test is significant at 5% in a pair of campaigns; "
              "the verdict is computed from the comparisons above, for harmful outcomes (critical SDC or DUE, what a user "
              "loses) and for any SDC (any change of the final accuracy, mostly tolerable).", "",
              f"Verdict: harmful outcomes differ between dp and mp {tally.said('harmful')}; any SDC differs {tally.said('SDC')}.", ""]

    # 4. Injection time.
    L += ["### 4. Early vs late injection", "",
          "The early and the late checkpoint of a run have the same tensors, so the same trial flips the same sites in both "
          "(paired, as above):", ""]
    when = Tally("early", "late")
    for c in camps:
        if c["point"] != "early" or c["strata"] != "field":
            continue
        lt = partner(camps, c, point="late")
        if lt:
            for grp, classes in (("SDC", ("critical_sdc", "tolerable_sdc")), ("harmful", HARMFUL)):
                line, p, diff = compare("early", c["recs"], "late", lt["recs"], classes)
                when.add(grp, p, diff)
                L.append(f"- {c['model']} {c['mode']} {c['role']}, {c['flips']} flip(s), {grp}: {line}.")
    if when.t:
        # Not one of the seed studies' claims (they vary the injection time as part of their
        # setup): a result, computed by the same rule as claim 3.
        res = (f"Result (rule as for claim 3: the paired test significant at 5% in a pair of campaigns): harmful outcomes differ "
               f"between an early and a late injection {when.said('harmful')}; any SDC differs {when.said('SDC')}.")
        if when.t["SDC"][1] and not when.t["SDC"][2] and not sum(when.t["harmful"][1:]):
            res += (" A flip with more training left after it changes the final accuracy more often, but not more often "
                    "harmfully, in these runs.")
        L += ["", res]
    L += ["", "### What differs from the seed studies' setup", "",
          "- Framework: resil's own C++ trainer (OpenBLAS, deterministic rank-ordered reductions, bit-exact resume) instead of a "
          "Python framework; flips are applied to the HDF5 checkpoint between two epochs, not in memory during a step.",
          "- Models and data: a 784-256-128-10 MLP and a LeNet-5-style CNN on Fashion-MNIST (training subset and schedule in the "
          "golden-run table), trained on CPU with 4 ranks or stages on one machine; the seed studies' models, data sets and scales "
          "are theirs (see the papers), so only the qualitative claims are compared.",
          "- Outcome: the test accuracy at the end of the golden schedule against the golden run of the same checkpoint "
          f"(tolerance 1 point), on the first {params['test_limit']} test images.", ""]

    open(os.path.join(results, "dp-vs-mp-grid.md"), "w").write("\n".join(L) + "\n")

    # The records, slimmed: what the tables and findings need, and where each flip went.
    keep = ("trial", "class", "metric", "golden_metric", "delta", "exit_code", "signal", "stratum", "n_flips", "injected_nonfinite")
    # mtime 0: the same records give the same bytes (no timestamp in the gzip header).
    with io.TextIOWrapper(gzip.GzipFile(os.path.join(results, "dp-vs-mp-grid-results.jsonl.gz"), "wb", compresslevel=9, mtime=0)) as z:
        for c in camps:
            for r in c["recs"]:
                s = {"campaign": c["name"], **{k: r.get(k) for k in keep},
                     "flips": [[f["dataset"], f["index"], f["bit"]] for f in r.get("flips", [])]}
                z.write(json.dumps(s, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
