"""docs/results/dp-vs-mp.md from the study's published records (method: docs/design/study-method.md).

Reads PUBLISH/goldens.json and PUBLISH/NAME.jsonl.gz (one per finished arm); with --live DIR also the
records of arms still running in that study directory (marked as such: no verdict is drawn from an arm
that has not reached its planned size). Every number is computed here from the records.
"""
import copy
import json
import math
import statistics
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import plan as P  # noqa: E402
import stats as S  # noqa: E402

DUE = ("load_failure", "hang", "crash", "nan_at_load", "nan_later")
ALPHA = 0.05
HARMFUL = ("critical", "due")
OUTSIDE = ("sdc", "critical")   # outside the noise band
# the two outcomes the paired tests compare
PAIRED = {"harmful": lambda o: o in HARMFUL, "SDC (outside band)": lambda o: o in OUTSIDE}
F32_FIELDS = {"sign": 1, "exponent": 8, "mantissa": 23}   # bits of each field of an f32 word
BF16_FIELDS = {"sign": 1, "exponent": 8, "mantissa": 7}
CURVES = ("within_band", "spike_recover", "spike_degrade", "gradual_drift", "silent_degradation", "diverged")
LOSS_VISIBLE = ("spike_recover", "spike_degrade", "gradual_drift", "diverged")   # curve classes the logged loss shows
FAULT_MODEL = os.path.join(ROOT, "examples", "fault-models", "dram-field-noecc.json")
# The study's classes as `ckpt-flip fit` counts them (a DUE keeps its campaign class).
FIT_CLASS = {"critical": "critical_sdc", "sdc": "tolerable_sdc", "noise_changed": "masked", "bitwise_masked": "bit_masked",
             "unknown": "unreadable_summary"}


# What a flip of an Adam(W) moment did (see moment_effect), in the order the reports list them.
MOMENT_EFFECTS = ("m", "v shrinks", "v grows", "v negative", "v -0", "v non-finite")


def moment_effect(flip):
    """What a flip of an Adam(W) moment did: 'm' (exp_avg), or for v (exp_avg_sq) 'v shrinks' (|new| < |old|: the
    step 1/sqrt(v) grows), 'v grows' (the step shrinks), 'v negative' (the sign bit of a positive v: the update divides
    by the root of a negative number), 'v -0' (the sign bit of a zero v: sqrt(-0) = -0, the same step) and
    'v non-finite' (the new value is Inf or NaN)."""
    dataset, _, _, bit, old, new = flip[:6]
    if not dataset.endswith("exp_avg_sq"):
        return "m"
    if old is None or new is None or not math.isfinite(new):
        return "v non-finite"
    if new < 0:
        return "v negative"
    if new == 0 and old == 0:
        return "v -0" if bit == 31 else "v shrinks"
    return "v grows" if abs(new) > abs(old) else "v shrinks"


# ---------------------------------------------------------------- loading

def load_arm(path, arm=None):
    """(head, records) of a published arm; a file that is not a complete record of `arm` is one error line, exit 4."""
    from dp_vs_mp import BadRecords, die, read_published  # noqa: E402
    try:
        return read_published(path, arm)
    except BadRecords as e:
        die(str(e), 4)


def load(publish, live, arms_of=P.arms, slim=None, study="dp-vs-mp"):
    """(plan name, goldens.json, data): per arm of the plan that has records, {arm, golden summary, fault space,
    records, complete}, from PUBLISH/NAME.jsonl.gz, else (with `live`) from the running study directory.
    arms_of(plan name) lists the plan's arms; slim(record) slims a live record (default: dp_vs_mp's); `study` is the
    study goldens.json must name, where it names one."""
    from dp_vs_mp import BadRecords, die, read_goldens, read_order, read_records  # noqa: E402
    if slim is None:
        from dp_vs_mp import slim  # noqa: E402
    if not os.path.isdir(publish):
        die(f"--publish: no directory {publish}", 2)
    if live and not os.path.isdir(live):
        die(f"--live: no directory {live}", 2)
    data = {}
    gold_path = os.path.join(publish, "goldens.json")
    try:
        gold = read_goldens(gold_path)
    except BadRecords as e:
        die(str(e), 4)
    if gold and gold.get("study", study) != study:
        die(f"{gold_path}: the {gold['study']} study's records, not the {study} study's: use its own report", 2)
    plan_name = gold["plan"] if gold else "full"
    stamp = os.path.join(live, "plan") if live else None
    if stamp and os.path.exists(stamp) and open(stamp).read().strip() != plan_name:
        die(f"--live: {live} holds the '{open(stamp).read().strip()}' plan's study, --publish the '{plan_name}' plan's records", 2)
    for arm in arms_of(plan_name):
        path = os.path.join(publish, arm.name + ".jsonl.gz")
        if os.path.exists(path):
            head, recs = load_arm(path, arm)
            data[arm.name] = {"arm": arm, "golden": head["golden_summary"], "space": head.get("space"), "recs": recs,
                              "complete": len(recs) >= arm.n}
        elif live:
            d = os.path.join(live, "campaigns", arm.name)
            if not os.path.exists(os.path.join(d, "golden.json")):
                continue
            golden = json.load(open(os.path.join(d, "golden.json")))["summary"]
            recs = read_order(d) if arm.kind == "order" else [slim(r) for r in read_records(d)]
            cj = os.path.join(d, "campaign.json")
            space = json.load(open(cj)).get("space") if os.path.exists(cj) else None
            if recs:
                data[arm.name] = {"arm": arm, "golden": golden, "space": space, "recs": recs, "complete": len(recs) >= arm.n}
    return plan_name, gold, data


# ---------------------------------------------------------------- classification

def images(r, test_limit):
    if r.get("metric") is None or r.get("golden_metric") is None:
        return None
    return round((r["metric"] - r["golden_metric"]) * test_limit)


def golden_key(arm):
    return (arm.model, arm.mode, arm.opt, arm.seed, arm.point)


class NoiseBands:
    """Noise bands from the noise arms' fault-free records: Δ per golden run, and per golden and loss-curve window
    the largest relative deviation from the golden resume's curve. A study says what identifies a golden run
    (key) and what Δ is (delta); its band() pools the goldens."""

    def __init__(self, data):
        self.deltas = {}  # golden key -> [Δ]
        self.ulp_deltas = {}  # golden key -> [Δ] of the ulp runs alone (the fault trials' own data order)
        self.curves = {}  # golden key -> [relative deviation per window]
        self.ulp_curves = {}  # the same of the ulp runs alone
        self.golden_curve = {}
        for d in data.values():
            a = d["arm"]
            if a.family != "noise":
                continue
            k = self.key(a)
            g = d["golden"].get("loss_curve")
            if g:
                self.golden_curve[k] = g
            for r in d["recs"]:
                if r.get("class") in DUE:
                    continue
                di = self.delta(r)
                if di is not None:
                    self.deltas.setdefault(k, []).append(di)
                    if a.kind == "campaign":
                        self.ulp_deltas.setdefault(k, []).append(di)
                lc = (r.get("summary") or {}).get("loss_curve")
                if g and lc and len(lc) == len(g) and all(v is not None for v in lc):
                    dev = [abs(x - y) / abs(y) if y else 0.0 for x, y in zip(lc, g)]
                    self.curves.setdefault(k, []).append(dev)
                    if a.kind == "campaign":
                        self.ulp_curves.setdefault(k, []).append(dev)

    def curve_band(self, arm):
        rows = self.curves.get(self.key(arm))
        return [max(col) for col in zip(*rows)] if rows else None

    def ulp_only(self):
        """The same bands from the ulp runs alone."""
        other = copy.copy(self)
        other.deltas = self.ulp_deltas
        other.curves = self.ulp_curves
        return other


class Bands(NoiseBands):
    """The accuracy band per (model, point), pooled over the seed-1 Adam goldens of dp and mp, widened for another
    golden by its own noise range; Δ in test images."""

    def __init__(self, data, test_limit):
        self.test_limit = test_limit
        super().__init__(data)

    def key(self, arm):
        return golden_key(arm)

    def delta(self, r):
        return images(r, self.test_limit)

    def pooled(self, model, point):
        vals = []
        for mode in ("dp", "mp"):
            vals += self.deltas.get((model, mode, "adam", 1, point), [])
        return vals

    def band(self, arm):
        vals = self.pooled(arm.model, arm.point) + self.deltas.get(golden_key(arm), [])
        return (min(vals), max(vals)) if vals else None


def classify(r, band, test_limit):
    c = r.get("class")
    if c in DUE:
        return "due"
    if c == "unreadable_summary":
        return "unknown"
    d = images(r, test_limit)
    out = d is not None and band is not None and (d < band[0] or d > band[1])
    if out:
        return "critical" if d < -0.01 * test_limit else "sdc"
    return "bitwise_masked" if c == "bit_masked" else "noise_changed"


def divergence(r):
    """A dp trial record's replica_divergence (None where the run recorded none)."""
    return (r.get("summary") or {}).get("replica_divergence")


def curve_class(r, golden_curve, cband, outcome, worse=True):
    """The loss-curve class of record R against the per-window band CBAND; OUTCOME is its outcome class and WORSE
    whether its final metric lies on the worse side of golden (an SDC on the better side is no degradation)."""
    if outcome == "due":
        return "diverged"
    lc = (r.get("summary") or {}).get("loss_curve")
    if not lc or not golden_curve or not cband or len(lc) != len(golden_curve) or any(v is None for v in lc):
        return None
    ex = [(x - y) / abs(y) - b if y else 0.0 for x, y, b in zip(lc, golden_curve, cband)]
    above = [i for i, e in enumerate(ex) if e > 0]
    if not above:
        return "silent_degradation" if outcome in OUTSIDE and worse else "within_band"
    if ex[-1] <= 0:
        return "spike_recover"
    return "spike_degrade" if above[0] <= 1 else "gradual_drift"


def two_level_fit(ckpt_flip, fault_model, outcomes, total_bits, draws=20000):
    """`ckpt-flip fit` over one campaign's trials as this study classes them (SDC = outside the noise band): a
    campaign directory of their classes is written to a temporary directory, the exposed memory is the campaign's
    fault space. Returns the fit's JSON."""
    with tempfile.TemporaryDirectory(prefix="study-fit-") as d:
        os.makedirs(os.path.join(d, "c", "results"))
        meta = {"format": "resil-campaign/1", "space": {"total_bits": total_bits},
                "config": {"inject": {"model": "flip", "flips": 1, "strata": "none"}, "trials": len(outcomes), "confidence": 0.95}}
        with open(os.path.join(d, "c", "campaign.json"), "w") as f:
            json.dump(meta, f)
        with open(os.path.join(d, "c", "results", "shard-0-of-1.jsonl"), "w") as f:
            for r, o, _ in outcomes:
                f.write(json.dumps({"trial": r["trial"], "class": r["class"] if o == "due" else FIT_CLASS[o]}) + "\n")
        out = os.path.join(d, "fit.json")
        p = subprocess.run([ckpt_flip, "fit", "--fault-model", fault_model, "--results", os.path.join(d, "c"), "--draws", str(draws),
                            "--seed", "1", "--json", out], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"report: ckpt-flip fit failed (exit {p.returncode}): {p.stderr.strip()}")
        return json.load(open(out))


# ---------------------------------------------------------------- formatting

def pct(x, n):
    return f"{100 * x / n:.1f}%" if n else "-"


def ci(x, n):
    lo, hi = S.clopper_pearson(x, n)
    return f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def rate(x, n):
    return f"{x}/{n} = {pct(x, n)} {ci(x, n)}" if n else "no trials"


def pfmt(p):
    return f"{p:.3g}"


def points(x):
    """A difference of rates in points, to 0.1, or to 2 significant digits where 0.1 would round it to zero."""
    s = f"{100 * x:.1f}"
    return f"{100 * x:.2g}" if x != 0 and float(s) == 0 else s


def odds_text(o, b_label):
    """The MH odds ratio: undefined where no stratum has a harmful trial, infinite where only the first side has them."""
    return ("undefined (no harmful trial)" if math.isnan(o) else f"infinite (no harmful {b_label} trial)" if math.isinf(o)
            else f"{o:.3g}")


def diff_line(t, a_label, b_label):
    """One paired comparison of compare(): both rates, the discordant pairs, the interval, the tests."""
    a, b = t["a"], t["b"]
    return (f"{a_label} {rate(a['harmful'], a['n'])} vs {b_label} {rate(b['harmful'], b['n'])}; harmful in only one of "
            f"{t['pairs']} pairs: {t['only_a']} {a_label}, {t['only_b']} {b_label}; difference [{points(t['ci'][0])}, "
            f"{points(t['ci'][1])}] points; McNemar p = {pfmt(t['p'])} (Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])}); CMH across "
            f"fields p = {pfmt(t['cmh']['p'])}, MH odds ratio {odds_text(t['cmh']['or'], b_label)}; P({a_label} > {b_label}) = {t['post']:.3f}")


# ---------------------------------------------------------------- the report

class ReportBase:
    """What the studies' reports share: the output lines, outcome counts, test families, and the rule that a
    verdict waits for every arm of its claim that the plan runs (set self.arms, self.data, self.outcomes, self.out)."""

    def w(self, line=""):
        self.out.append(line)

    def counts(self, name, pred=lambda r: True):
        rows = [x for x in self.outcomes.get(name, []) if pred(x[0])]
        n = len(rows)
        c = {k: sum(1 for _, o, _ in rows if o == k) for k in ("due", "sdc", "critical", "noise_changed", "bitwise_masked", "unknown")}
        c["n"] = n
        c["harmful"] = c["due"] + c["critical"]
        c["outside"] = c["sdc"] + c["critical"]
        c["incorrect"] = c["outside"] + c["due"]
        c["changed"] = n - c["bitwise_masked"] - c["due"] - c["unknown"]
        return c

    def complete(self, name):
        d = self.data.get(name)
        return bool(d and d["complete"])

    def paired(self, a_name, b_name, outcome):
        """Pairs the trials of two campaigns by trial id (the same sites): (pairs, a's count, b's count, only a, only b)."""
        ra = {r["trial"]: o for r, o, _ in self.outcomes[a_name]}
        rb = {r["trial"]: o for r, o, _ in self.outcomes[b_name]}
        common = sorted(set(ra) & set(rb))
        fa = [outcome(ra[t]) for t in common]
        fb = [outcome(rb[t]) for t in common]
        only_a = sum(1 for x, y in zip(fa, fb) if x and not y)
        only_b = sum(1 for x, y in zip(fa, fb) if y and not x)
        return len(common), sum(fa), sum(fb), only_a, only_b

    def reproduced_line(self):
        """After a golden-run table: what holds these numbers, and where it was shown across machines."""
        self.w("A golden run trained again in a new study directory (a new machine) must give these numbers exactly, every "
               "epoch's losses and accuracies, or the driver stops (exit 7) before a trial runs; all 15 golden runs of the two "
               "studies, first trained on an AMD EPYC, did on an Intel Xeon with AVX-512 "
               "([2026-11-28](2026-11-28-goldens-on-another-cpu.md)).")
        self.w()

    def replica_line(self, one, label, all_name=None):
        """What a fault in one dp replica's state did: whether the replicas were still apart at the end (data
        parallelism never re-synchronises weights), and whether anything a run shows noticed it: the logged
        training loss (every rank's), a stop on a non-finite value, rank 0's result (the one evaluated and saved)."""
        rows = [(o, cc, divergence(r)) for r, o, cc in self.outcomes[one]]
        div = [x for x in rows if x[2]]
        if not div:
            return None
        apart = [(o, cc) for o, cc, d in div if d["ranks_differing"] > 0]
        ds = sorted(d["elements_differing"] for _, _, d in div)
        med, most = ds[len(ds) // 2], ds[-1]
        loss = sum(1 for _, cc in apart if cc in LOSS_VISIBLE)
        result = sum(1 for o, _ in apart if o in OUTSIDE)
        unseen = sum(1 for o, cc in apart if cc not in LOSS_VISIBLE and o not in OUTSIDE)
        due = sum(1 for o, _, _ in rows if o == "due")
        line = f"- {label}: replicas still apart at the end in {len(apart)} of {len(div)} trials (median {med}, at most {most} of {div[0][2]['elements']} weights differ from rank 0's)"
        if all_name:
            dall = [d for d in (divergence(r) for r, _, _ in self.outcomes[all_name]) if d]
            line += f"; the all-replica arm: {sum(1 for d in dall if d['ranks_differing'] > 0)} of {len(dall)}"
        return (line + f". Of the {len(apart)} apart, the logged training loss left its band in {loss} and rank 0's result left the noise band "
                f"in {result}; {unseen} ended apart with neither showing it. Stopped on a non-finite value: {due} of {len(rows)}.")

    def mcnemar(self, what, a_name, b_name, outcome, a_label, b_label, a_short=None, b_short=None):
        """The exact McNemar test of an outcome on the sites two campaigns share, as a test of a family."""
        n, xa, xb, oa, ob = self.paired(a_name, b_name, outcome)
        return {"what": f"{what}: {a_label} {rate(xa, n)} vs {b_label} {rate(xb, n)}; {oa} only {a_short or a_label}, {ob} only {b_short or b_label}",
                "p": S.mcnemar_exact(oa, ob)}

    def family(self, tests):
        """tests: list of dicts with 'p'; adds 'holm' and 'bh'."""
        if not tests:
            return tests
        ps = [t["p"] for t in tests]
        for t, h, q in zip(tests, S.holm(ps), S.benjamini_hochberg(ps)):
            t["holm"], t["bh"] = h, q
        return tests

    def opening(self, title, script, records, method, question):
        """The title, where the report comes from, and which arms are complete (a partial study says which are not)."""
        done = [a for a in self.arms if self.complete(a.name)]
        running = [a for a in self.arms if a.name in self.data and not self.complete(a.name)]
        missing = [a for a in self.arms if a.name not in self.data]
        self.w(f"# {title}")
        self.w()
        self.w(f"Generated by `{script} report` on {time.strftime('%Y-%m-%d')} from the records in "
               f"`{records}` (method, estimands and budget: [design/study-method.md]({method})).")
        self.w()
        if missing or running:
            self.w(f"**Partial study: {len(done)} of {len(self.arms)} arms complete**; {len(running)} running, {len(missing)} not started. "
                   f"Verdicts are drawn only from complete arms; a {question} whose arms are not all complete says *pending*. "
                   "Arms not complete: " + ", ".join(
                       f"`{a.name}` ({len(self.data[a.name]['recs'])} of {a.n})" if a.name in self.data else f"`{a.name}` (0 of {a.n})"
                       for a in running + missing) + ".")
        else:
            self.w(f"All {len(self.arms)} arms complete.")
        self.w()

    def compare(self, m, o):
        """Harmful rates of two campaigns on one checkpoint. Every campaign draws trial i's sites from one seeded
        stream, so trial i of the two shares its random draw (the same element, or the element at the same place
        of the other fault space): they are paired by trial id. Counts a and b, the exact McNemar p, Newcombe's
        paired interval of the difference, P(a > b) under a Jeffreys Dirichlet posterior of the four cells (exact),
        and the CMH test across fields (sign / exponent / mantissa; within a field the two arms' trials are
        different draws, so its strata are unpaired)."""
        a, b = self.counts(m), self.counts(o)
        n, xa, xb, oa, ob = self.paired(m, o, lambda oc: oc in HARMFUL)
        both = xa - oa
        tables = []
        for field in ("sign", "exponent", "mantissa"):
            fa = [oc for r, oc, _ in self.outcomes[m] if r.get("field") == field]
            fb = [oc for r, oc, _ in self.outcomes[o] if r.get("field") == field]
            ha, hb = sum(oc in HARMFUL for oc in fa), sum(oc in HARMFUL for oc in fb)
            tables.append(((ha, len(fa) - ha), (hb, len(fb) - hb)))
        return {"a": a, "b": b, "pairs": n, "only_a": oa, "only_b": ob, "p": S.mcnemar_exact(oa, ob),
                "ci": S.newcombe_paired_diff(both, oa, ob, n - both - oa - ob) if n else (-1.0, 1.0),
                "cmh": S.cmh(tables), "post": S.posterior_prob_greater_paired(oa, ob)}

    def role_verdict(self, tests, names, a_what, b_what, claim="reproduced", negated="not reproduced"):
        """The rule of a claim "a is more sensitive than b": *{claim}* when a's harmful rate is higher, Holm p < 0.05, in every
        pair of the family; otherwise not, saying whether b was significantly higher somewhere (reversed) or no pair differed.
        Decided as soon as one complete pair fails, whatever arms are still running."""
        def higher(t, x, y):
            return t["holm"] < ALPHA and t[x]["harmful"] * t[y]["n"] > t[y]["harmful"] * t[x]["n"]
        more_a = [t for t in tests if higher(t, "a", "b")]
        more_b = [t for t in tests if higher(t, "b", "a")]
        # Adding a test to a family never lowers another's Holm-adjusted p, but a test whose arms are still running can
        # still move (and a smaller p of one test can lower the others'): decided only when every present test is final.
        final = all(self.complete(n) for t in tests for n in t["names"])
        failed = [t for t in tests if not higher(t, "a", "b")] if final else []
        rule = (f"Rule: *{claim}* when the harmful rate of {a_what} is higher than that of {b_what}, Holm-adjusted p < 0.05, in every "
                "pair; once every pair present is complete, one that fails decides it, as a test joining the family only raises the "
                "others' adjusted p. ")
        counts = (f"{a_what} significantly more harmful in {len(more_a)} of {len(tests)} pairs, {b_what} in {len(more_b)}"
                  + (f" ({', '.join(t['what'] for t in more_b)})" if more_b else ""))
        waiting = self.verdict(names, "")
        if failed:
            how = "reversed" if more_b else "no difference shown"
            planned = {a.name for a in self.arms}
            left = sum(1 for n in dict.fromkeys(names) if n in planned and not self.complete(n))
            return rule + f"Verdict: **{negated}** ({how}): {counts}" + (f"; the {left} arms still to run cannot change it." if left else ".")
        if waiting:
            return rule + f"Verdict: {waiting}."
        return rule + f"Verdict: **{claim}**: {counts}."

    def post_stratified(self, arms, shares_of, what):
        """The harmful rates of single-flip campaigns post-stratified by the field each trial hit, weighted by the fields'
        shares of the stored bits (shares_of(arm): {field: bits}), with the Jeffreys-mixture interval."""
        rows = []
        for a in arms:
            if a.name not in self.outcomes:
                continue
            shares = shares_of(a)
            strata = {}
            for r, o, _ in self.outcomes[a.name]:
                f = r.get("field")
                if f in shares:
                    x, n = strata.get(f, (0, 0))
                    strata[f] = (x + (o in HARMFUL), n + 1)
            if not strata:
                continue
            st = S.stratified_rate(strata, shares)
            c = self.counts(a.name)
            per = ", ".join(f"{f} {strata[f][0]}/{strata[f][1]}" for f in shares if f in strata)
            rows.append(f"| {a.name} | {rate(c['harmful'], c['n'])} | {100 * st['point']:.1f}% [{100 * st['lo']:.1f}, {100 * st['hi']:.1f}] | {per} |")
        if not rows:
            return
        self.w(f"The same harmful rates post-stratified by the field each trial hit (sign, exponent, mantissa weighted by their shares "
               f"of the stored {what} bits): the interval is the Jeffreys-posterior mixture's, so a field with no harmful trial still "
               "contributes its spread (40,000 draws: the bounds move by about 0.02 points between seeds); the point is the plug-in "
               "estimate, and where no field has a harmful trial the interval starts at 0, as a single rate's does.")
        self.w()
        self.w("| campaign | uniform (CP) | post-stratified [95 %] | per field (harmful / n) |")
        self.w("|---|---|---|---|")
        for r in rows:
            self.w(r)
        self.w()

    def classify_arms(self, classify_one, curve_band, worse):
        """self.outcomes: arm name -> [(record, outcome, loss-curve class)] for every campaign arm, each record
        classified against its arm's noise band and its loss curve against curve_band(bands, arm) of self.bands;
        worse(record, band) says whether its final metric lies past the band on the worse side."""
        self.outcomes = {}
        for name, d in self.data.items():
            a = d["arm"]
            if a.kind != "campaign":
                continue
            band = self.bands.band(a)
            gc = d["golden"].get("loss_curve")
            cb = curve_band(self.bands, a)
            self.outcomes[name] = [(r, o, curve_class(r, gc, cb, o, worse(r, band))) for r in d["recs"] for o in [classify_one(r, band)]]
        self.classify_one, self.curve_band, self.worse = classify_one, curve_band, worse

    def ulp_curve_classes(self, a):
        """The loss-curve classes of arm A's records against the ulp runs' per-window band (None without one); the
        outcome stays the pooled band's."""
        nb = self.curve_band(self.bands.ulp_only(), a)
        if not nb:
            return None
        gc = self.data[a.name]["golden"].get("loss_curve")
        band = self.bands.band(a)
        return [curve_class(r, gc, nb, o, self.worse(r, band)) for r, o, _ in self.outcomes[a.name]]

    def band_sensitivity(self, band_cell):
        """The outside-band counts again against the band of the ulp runs alone: a fault trial keeps the golden's data
        order, so those runs are the null closest to it, and far narrower than the pooled band where the order runs set
        its ends. Harmful counts do not depend on the choice while the critical threshold lies beyond both bands."""
        ulp = self.bands.ulp_only()
        rows = []
        for a in self.fault_arms():
            band, narrow = self.bands.band(a), ulp.band(a)
            if not band or not narrow:
                continue
            outs = [self.classify_one(r, narrow) for r, _, _ in self.outcomes[a.name]]
            c = self.counts(a.name)
            sdc = sum(o in OUTSIDE for o in outs)
            harm = sum(o in HARMFUL for o in outs)
            rows.append(f"| {a.name} | {band_cell(narrow)} | {rate(sdc, len(outs))} | {harm} | {c['outside']} | {c['harmful']} |")
        if not rows:
            return
        self.w("Sensitivity to the band: the pooled band's ends are set by the data-order runs, while a fault trial keeps the "
               "golden's data order; against the band of the ulp runs alone (the closest null, and a narrower one) the SDC counts "
               "are these. The band's stated confidence assumes one continuous noise distribution: the pooled runs are two (ulp and "
               "order), and ulp runs tie where the perturbation dies out, so read it as indicative. *Harmful* does not depend on the "
               "choice where both bands lie inside the critical threshold.")
        self.w()
        self.w("| campaign | ulp-only band | SDC outside it | harmful | SDC outside the pooled band | harmful |")
        self.w("|---|---|---|---:|---:|---:|")
        for r in rows:
            self.w(r)
        self.w()

    def fault_arms(self):
        """The campaign arms with records, noise arms left out, in the plan's order."""
        return [a for a in self.arms if a.kind == "campaign" and a.family != "noise" and a.name in self.outcomes]

    def outcome_rows(self, band_cell, band_head="band", design=lambda a: ""):
        """The outcome-class table, one row per fault arm, against its noise band (band_cell formats it; design(arm)
        names a sampling design other than the uniform estimand's)."""
        self.w(f"| campaign | n | {band_head} | SDC (outside band) | critical | DUE | harmful | bitwise changed | in band |")
        self.w("|---|---:|---|---|---:|---|---|---:|---:|")
        for a in self.fault_arms():
            c = self.counts(a.name)
            band = self.bands.band(a)
            mark = (f" ({design(a)})" if design(a) else "") + ("" if self.complete(a.name) else f" (running, {c['n']} of {a.n})")
            self.w(f"| {a.name}{mark} | {c['n']} | {band_cell(band)} | {rate(c['outside'], c['n'])} | {c['critical']} | "
                   f"{rate(c['due'], c['n'])} | {rate(c['harmful'], c['n'])} | {pct(c['changed'], c['n'] - c['due'] - c['unknown'])} | {c['noise_changed']} |"
                   if band else f"| {a.name}{mark} | {c['n']} | no noise yet | | | | | | |")
        self.w()

    def curve_rows(self):
        """The loss-curve class table, one row per fault arm: against the pooled noise band and the ulp runs' alone."""
        heads = [k.replace("_", " ") for k in CURVES]
        self.w("| campaign | " + " | ".join(heads) + " | no curve | against the ulp band: " + " | ".join(heads) + " |")
        self.w("|---|" + "---:|" * (2 * len(CURVES) + 1))
        inside = [0, 0, 0, 0]  # within the pooled band / trials with a curve; the same against the ulp band
        for a in self.fault_arms():
            rows = self.outcomes[a.name]
            cnt = {k: sum(1 for _, _, cc in rows if cc == k) for k in CURVES}
            narrow = self.ulp_curve_classes(a)
            ncnt = {k: sum(1 for cc in narrow or [] if cc == k) for k in CURVES}
            inside[0] += cnt["within_band"]
            inside[1] += sum(cnt.values())
            if narrow:
                inside[2] += ncnt["within_band"]
                inside[3] += sum(ncnt.values())
            self.w(f"| {a.name} | " + " | ".join(str(cnt[k]) for k in CURVES) + f" | {sum(1 for _, _, cc in rows if cc is None)} | "
                   + " | ".join(str(ncnt[k]) if narrow else "-" for k in CURVES) + " |")
        self.w()
        if inside[1]:
            self.w(f"Two bands: the noise runs' pooled (ulp and data order: what a loss curve varies by from one valid run to "
                   f"another, so an excursion past it is one a person watching the curve could see), and the ulp runs' alone (the "
                   f"fault trials' own data order: an excursion past it is any mark the fault left on the curve beyond numerical "
                   f"chaos). {inside[0]} of {inside[1]} curves ({pct(inside[0], inside[1])}) stay within the pooled band and "
                   f"{inside[2]} of {inside[3]} ({pct(inside[2], inside[3])}) within the ulp band. A silent degradation is an SDC on "
                   "the worse side of the band whose curve stayed within the band; an SDC on the better side is counted as an SDC "
                   "above, never as a degradation.")
            self.w()

    def seed_lines(self, rows):
        """A line per (label, [(seed, arm), ...]) with each seed's harmful rate, where any of its arms has records."""
        any_row = False
        for label, arms in rows:
            parts = [f"seed {seed} {rate(c['harmful'], c['n'])}" for seed, name in arms if name in self.outcomes
                     for c in [self.counts(name)]]
            if parts:
                any_row = True
                self.w(f"- {label}, harmful: " + "; ".join(parts) + ".")
        if not any_row:
            self.w("No seed arm has records yet.")
        self.w()

    def width_rows(self, targets, outcome):
        """The trial-budget table's rows: per family with a width target, its planned n and the widest 95 % CP interval
        of `outcome` (a counts() key) that its campaigns with records reached."""
        for fam, t in targets.items():
            if "width" not in t:
                continue
            arms = [a for a in self.arms if a.family == fam]
            widths = [100 * S.cp_width(c[outcome], c["n"]) for c in (self.counts(a.name) for a in arms if a.name in self.outcomes)]
            reached = f"{max(widths):.1f} points over {len(widths)} campaign(s)" if widths else "not run yet"
            self.w(f"| {fam} | {t['why']} | {arms[0].n if arms else 0} | {reached} |")

    def timing(self, group_of, measured=None):
        """The records' trial time, and what the arms not complete still cost: per group (group_of(arm): a model, a
        mode and point) the median CPU time of the trials of its latest arm in plan order that has timed trials (the
        arms run in that order, so its trials ran with today's options, build and machine), else the CPU seconds per
        trial `measured` gives for the group (a rate measurement), else the wall time of its recorded trials."""
        recs = [(d["arm"], r) for d in self.data.values() for r in d["recs"]]
        wall = sum(r.get("wall_seconds") or 0 for _, r in recs)
        cpu = [r["cpu_seconds"] for _, r in recs if r.get("cpu_seconds") is not None]
        line = f"Trial time in these records: {wall / 3600:.1f} wall-hours over {len(recs)} trials and fault-free resumes"
        if cpu:
            line += f"; {sum(cpu) / 3600:.1f} CPU-hours over the {len(cpu)} that record their CPU time (all their processes)"
        self.w(line + ".")
        left = {}
        for a in self.arms:
            done = len(self.data[a.name]["recs"]) if a.name in self.data else 0
            if done < a.n:
                left[group_of(a)] = left.get(group_of(a), 0) + a.n - done
        parts = []
        for g, k in left.items():
            c, latest = [], None
            for a in self.arms:  # plan order: the last arm of the group with timed trials
                t = [r["cpu_seconds"] for r in (self.data[a.name]["recs"] if a.name in self.data else []) if r.get("cpu_seconds") is not None]
                if group_of(a) == g and t:
                    c, latest = sorted(t), a.name
            w = sorted(r["wall_seconds"] for a, r in recs if group_of(a) == g and r.get("wall_seconds"))
            if c:
                med = statistics.median(c)
                parts.append(f"{g} {k} trials, about {k * med / 3600:.1f} CPU-h at the median {med:.1f} CPU-s of "
                             f"the {len(c)} timed trials of {latest}")
            elif measured and g in measured:
                parts.append(f"{g} {k} trials, about {k * measured[g] / 3600:.1f} CPU-h at the measured {measured[g]:.1f} CPU-s per trial")
            elif w:
                parts.append(f"{g} {k} trials, about {k * statistics.median(w) / 3600:.1f} wall-h at the median {statistics.median(w):.1f} s of its "
                             "recorded trials (no CPU time recorded)")
            else:
                parts.append(f"{g} {k} trials, none recorded yet to time them")
        if parts:
            self.w(f"Still to run: {'; '.join(parts)}. CPU-hours over the free cores give the wall time where `--jobs` times a "
                   "trial's ranks fits the cores.")

    def verdict(self, names, ok_text):
        """ok_text once every arm of NAMES that the plan runs is complete; otherwise what the verdict waits for.
        NAMES are all the arms the claim's rule reads, whether or not they have records yet."""
        planned = {a.name for a in self.arms}
        mine = [n for n in dict.fromkeys(names) if n in planned]
        if not mine:
            return "**not testable** here (the plan runs none of its arms)"
        waiting = [n for n in mine if not self.complete(n)]
        if waiting:
            return f"**pending** ({len(waiting)} of its {len(mine)} arms not complete)"
        return ok_text


class Report(ReportBase):
    def __init__(self, plan_name, gold, data, ckpt_flip=None):
        self.plan = plan_name
        self.ckpt_flip = ckpt_flip
        self.arms = P.arms(plan_name)
        self.gold = gold
        self.data = data
        self.test_limit = gold["test_limit"] if gold else P.TEST_LIMIT
        self.bands = Bands(data, self.test_limit)
        self.out = []
        self.classify_arms(lambda r, band: classify(r, band, self.test_limit), lambda bands, a: bands.curve_band(a),
                           lambda r, band: (images(r, self.test_limit) or 0) < (band[0] if band else 0))

    # ------------------------------------------------------------ sections
    def header(self):
        self.opening("dp vs mp: checkpoint bit-flip sensitivity against a noise baseline (Fashion-MNIST)", "scripts/study/dp_vs_mp.py",
                     "docs/results/dp-vs-mp-study/", "../design/study-method.md", "claim")
        if self.gold:
            ids = sorted({g["train"].get("numeric", {}).get("id", "?") for g in self.gold["goldens"].values()})
            self.w(f"Golden runs: {self.gold['epochs']} epochs, a checkpoint after each, {self.gold['ranks']} ranks (dp) or stages (mp); every trial "
                   f"resumes the checkpoint after epoch 1 (*early*) or 2 (*late*) to epoch 3 and is evaluated on the first {self.test_limit} test images. "
                   f"Numeric configuration: {', '.join(ids)}. Machine: {platform.machine()}, {os.cpu_count()} cores.")
            self.w()

    def goldens(self):
        if not self.gold:
            return
        self.w("## Golden runs")
        self.w()
        self.w("| golden | recipe (`ckpt-train train` options) | test acc per epoch | all 10,000 test images | train wall |")
        self.w("|---|---|---|---:|---:|")
        for name, g in sorted(self.gold["goldens"].items()):
            accs = " ".join(f"{100 * e['test_accuracy']:.2f}" for e in g["epochs"] if "test_accuracy" in e)
            recipe = g["params"].split(" ", 4)[-1]
            self.w(f"| {name} | `{recipe}` | {accs} | {100 * g['full_test_accuracy']:.2f}% | {g['train_seconds']:.0f} s |")
        self.w()
        self.reproduced_line()

    def noise(self):
        self.w("## Noise baseline")
        self.w()
        self.w("Δ = a fault-free resume's final test accuracy minus the golden resume's, in test images of "
               f"{self.test_limit}: *ulp* = a flip of bit 0 of one random model weight, *order* = the unaltered checkpoint resumed "
               "with another data order (`--shuffle-seed`). The band of a model and point is [min, max] of the pooled seed-1 runs "
               "of dp and mp; [min, max] of n draws covers 95 % of the noise distribution with the confidence given.")
        self.w()
        self.w("| model | point | n | band (images) | confidence (95 % content) | ulp: n, range | order: n, range | bitwise changed (ulp) |")
        self.w("|---|---|---:|---|---:|---|---|---:|")
        for model in ("mlp", "cnn"):
            for point in ("early", "late"):
                vals = self.bands.pooled(model, point)
                if not vals:
                    continue
                parts = {}
                changed = [0, 0]
                for kind in ("ulp", "order"):
                    v = []
                    for mode in ("dp", "mp"):
                        d = self.data.get(f"noise-{kind}-{model}-{mode}-{point}")
                        if d:
                            v += [images(r, self.test_limit) for r in d["recs"] if r.get("class") not in DUE and images(r, self.test_limit) is not None]
                            if kind == "ulp":
                                changed[0] += sum(1 for r in d["recs"] if r.get("class") != "bit_masked")
                                changed[1] += len(d["recs"])
                    parts[kind] = f"{len(v)}, [{min(v)}, {max(v)}]" if v else "-"
                self.w(f"| {model} | {point} | {len(vals)} | [{min(vals)}, {max(vals)}] | {S.tolerance_confidence(len(vals)):.3f} | "
                       f"{parts['ulp']} | {parts['order']} | {changed[0]}/{changed[1]} |")
        self.w()
        rows = []
        for d in self.data.values():
            a = d["arm"]
            if a.family == "noise" and (a.opt, a.seed) != ("adam", 1) and a.kind == "campaign":
                k = golden_key(a)
                v = self.bands.deltas.get(k, [])
                pooled = self.bands.pooled(a.model, a.point)
                if v and pooled:
                    inside = sum(1 for x in v if min(pooled) <= x <= max(pooled))
                    rows.append(f"| {a.model} {a.opt} seed {a.seed} | {len(v)} | [{min(v)}, {max(v)}] | {inside}/{len(v)} inside [{min(pooled)}, {max(pooled)}] |")
        if rows:
            self.w("Noise of the other goldens (late point, ulp and order runs) against the pooled seed-1 band (where they fall outside, "
                   "their own range widens the band for their campaigns):")
            self.w()
            self.w("| golden | n | range (images) | inside the seed-1 band |")
            self.w("|---|---:|---|---|")
            for r in sorted(rows):
                self.w(r)
            self.w()

    def campaigns(self):
        self.w("## Campaigns: outcome classes against the noise band")
        self.w()
        self.w("Rates are of one bit flipped uniformly at random among the stored bits of the targeted state (the primary estimand); "
               "95 % Clopper-Pearson intervals. **SDC** = Δ outside the band, **critical** = an SDC more than 1 point (20 images) down, "
               "**harmful** = critical SDC or DUE, **bitwise changed** = of the trials that ran to the end (not DUE), the share whose final "
               "weights differ from golden's (what the earlier grid called SDC; rank 0's weights, the ones evaluated and saved: in a "
               "one-replica arm the fault lives in rank 1, see its divergence line under claim 3), **in band** = changed bits, Δ inside the band.")
        self.w()
        self.outcome_rows(lambda band: f"[{band[0]}, {band[1]}]")
        self.band_sensitivity(lambda band: f"[{band[0]}, {band[1]}]")
        self.post_stratified([a for a in P.arms(self.plan) if a.kind == "campaign" and a.family in ("primary", "sgdm", "seeds", "replica")],
                             lambda a: F32_FIELDS, "f32")
        self.w("Loss-curve classes of the resumed trials (training-loss windows against the golden resume's curve and the noise runs' "
               "per-window band; definitions in the design):")
        self.w()
        self.curve_rows()

    def fit(self):
        """The two-level FIT of each complete single-flip campaign under the field DRAM fault model."""
        arms = [a for a in P.arms(self.plan) if a.kind == "campaign" and a.family in ("primary", "sgdm", "seeds", "replica")
                and self.complete(a.name)]
        if not arms:
            return
        fm = json.load(open(FAULT_MODEL))
        single_word = sum(p["p"] for p in fm["patterns"] if p["campaign_model"] != "flip")
        self.w("## Two-level FIT: these rates under field rates of DRAM upsets")
        self.w()
        self.w(f"What transient upsets of the memory holding a checkpoint cost, as the two-level model of Hari et al. composes them "
               f"(`ckpt-flip fit`, fault model `{os.path.relpath(FAULT_MODEL, ROOT)}`, [reference](../reference/fault-models.md)): "
               f"FIT (events per 10^9 hours of residency, per checkpoint) = upsets per Mbit x the checkpoint's stored Mbit x exposure x "
               f"restore probability x P(outcome | upset), with this study's classes (SDC = outside the noise band).")
        self.w()
        self.w(f"- Upset rate: {fm['source_fit_per_device']} FIT per DRAM device (Sridharan and Liberty, SC 2012, transient faults "
               f"only) / {fm['assumed_mbit_per_device']} Mbit per 1 Gbit device = {fm['raw_fit_per_mbit']} FIT/Mbit, drawn log-uniformly "
               f"over [{fm['raw_fit_per_mbit_range'][0]}, {fm['raw_fit_per_mbit_range'][1]}] (devices of 512 Mbit to 2 Gbit); no ECC. "
               "The 25,000-70,000 FIT/Mbit of Schroeder et al. (2009) counts repeating hard errors each time they are read and is "
               "not a transient rate: it is not used.")
        self.w(f"- Exposure {fm['exposure']} (the checkpoint stays resident) and restore probability {fm['restore_probability']} "
               "(every corrupted checkpoint is restored); a run that restores one checkpoint in N scales every FIT by 1/N. That is "
               "not an upper bound: row, column, bank and rank upsets corrupt many words but are modelled as one word with one flipped "
               "bit, and several flips in one checkpoint are far more often harmful than one (the K-flip arms under claim 1).")
        self.w(f"- Upset modes: single-bit and the row, column, bank and rank modes (one bit per affected word) take this campaign's "
               f"single-flip rates; single-word upsets (2 adjacent bits, {100 * single_word:.1f} % of upsets) were not measured: "
               "their outcome probabilities enter as the Jeffreys prior Beta(1/2, 1/2) over [0, 1] (conservative bounds: [0, 1]), "
               "which is most of the interval's width and, where the measured rates are small, most of the point (the prior's median "
               "is 1/2). *Point*: the Monte Carlo median (20,000 draws, seed 1), inside its 95 % interval; *measured modes*: the model "
               "at the observed proportions with single-word upsets counted as harmless. 1 FIT is one event per 114,077 years of "
               "residency (10^9 h / 8,766 h).")
        self.w()
        self.w("| campaign | Mbit | upsets (FIT) | SDC (outside band) FIT | critical SDC FIT | DUE FIT | measured modes: SDC / critical / DUE |")
        self.w("|---|---:|---:|---|---|---|---|")

        def cell(v):
            return f"{v['fit']:.3g} [{v['mc']['p2_5']:.2g}, {v['mc']['p97_5']:.2g}]"
        for a in arms:
            space = (self.data[a.name].get("space") or {}).get("total_bits")
            if not space or not self.ckpt_flip or not os.access(self.ckpt_flip, os.X_OK):
                why = "no fault-space size in its records" if not space else f"no ckpt-flip at {self.ckpt_flip}"
                self.w(f"| {a.name} | - | - | not computed: {why} | | | |")
                continue
            j = two_level_fit(self.ckpt_flip, FAULT_MODEL, self.outcomes[a.name], space)
            self.w(f"| {a.name} | {j['mbit']:.2f} | {j['raw_fit']:.3g} | {cell(j['sdc'])} | {cell(j['critical_sdc'])} | {cell(j['due'])} | "
                   f"{j['sdc']['plug_in']:.2g} / {j['critical_sdc']['plug_in']:.2g} / {j['due']['plug_in']:.2g} |")
        self.w()

    # ------------------------------------------------------------ findings
    def findings(self):
        self.w("## Findings")
        self.w()
        self.w("Each claim of the seed studies, the estimand resil measures for it, the tests (families Holm-adjusted; BH q-values "
               "alongside) and a verdict: *reproduced*, *not reproduced*, *not testable* (the design cannot show it), or *pending* "
               "(its arms are not complete).")
        self.w()
        self.claim1()
        self.claim2()
        self.claim3()
        self.claim4()
        self.seeds()

    def claim1(self):
        self.w("### 1. Models absorb flips unless a crucial bit (bit 30, the exponent's MSB) is hit")
        self.w()
        self.w("Estimands: the harmful rate of a flip of bit 30 of a uniformly chosen model weight (enriched campaign), split by the "
               "sign of the value before the flip; the harmful rate of 10 flips anywhere in the model state against 10 flips sparing bit 30.")
        self.w()
        names = []
        tests = []
        for model in ("mlp", "cnn"):
            n30 = f"{model}-dp-model-late-bit30"
            if n30 in self.outcomes:
                names.append(n30)
                rows = self.outcomes[n30]
                pos = [(r, o) for r, o, _ in rows if r["flips"] and r["flips"][0][4] is not None and r["flips"][0][4] >= 0]
                neg = [(r, o) for r, o, _ in rows if r["flips"] and r["flips"][0][4] is not None and r["flips"][0][4] < 0]
                hp = sum(1 for _, o in pos if o in ("critical", "due"))
                hn = sum(1 for _, o in neg if o in ("critical", "due"))
                sites = {(r["flips"][0][0], r["flips"][0][2]) for r, _, _ in rows if r["flips"]}
                c = self.counts(n30)
                p = S.fisher_exact(hp, len(pos) - hp, hn, len(neg) - hn)
                tests.append({"what": f"{model} bit 30: positive vs negative value", "p": p})
                self.w(f"- {n30}: harmful {rate(c['harmful'], c['n'])} (CP width {100 * S.cp_width(c['harmful'], c['n']):.1f} points) on "
                       f"{len(sites)} distinct weights; value positive before the flip: {rate(hp, len(pos))}; negative: {rate(hn, len(neg))}; "
                       f"Fisher p = {pfmt(p)}.")
            k10, k10n = f"{model}-dp-model-late-k10", f"{model}-dp-model-late-k10-no30"
            if k10 in self.outcomes and k10n in self.outcomes:
                names += [k10, k10n]
                a, b = self.counts(k10), self.counts(k10n)
                _, _, _, oa, ob = self.paired(k10, k10n, lambda oc: oc in HARMFUL)
                p = S.mcnemar_exact(oa, ob)
                tests.append({"what": f"{model} 10 flips: anywhere vs sparing bit 30", "p": p})
                hit30 = sum(1 for r, o, _ in self.outcomes[k10] if any(f[3] == 30 for f in r["flips"]))
                self.w(f"- {model}, 10 flips: anywhere {rate(a['harmful'], a['n'])} harmful ({hit30} trials hit bit 30); sparing bit 30 "
                       f"{rate(b['harmful'], b['n'])}; paired by trial (the same weights, other bits): harmful in only one: {oa} anywhere, "
                       f"{ob} sparing; McNemar p = {pfmt(p)}.")
            for point in ("early", "late"):
                for mode in ("dp", "mp"):
                    nm = f"{model}-{mode}-model-{point}"
                    if nm in self.outcomes:
                        names.append(nm)
                        rows = self.outcomes[nm]
                        h30 = [o for r, o, _ in rows if r["flips"] and r["flips"][0][3] == 30]
                        ho = [o for r, o, _ in rows if r["flips"] and r["flips"][0][3] != 30]
                        x30 = sum(1 for o in h30 if o in ("critical", "due"))
                        xo = sum(1 for o in ho if o in ("critical", "due"))
                        self.w(f"- {nm} (uniform, 1 flip): harmful with bit 30 {rate(x30, len(h30))}, any other bit {rate(xo, len(ho))}.")
        self.family(tests)
        if tests:
            self.w()
            for t in tests:
                self.w(f"  - {t['what']}: p = {pfmt(t['p'])}, Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])}")
        self.w()
        rule = [f"{m}-dp-model-late-{x}" for m in ("mlp", "cnn") for x in ("bit30", "k10-no30")]
        ok = True
        for model in ("mlp", "cnn"):
            b = self.counts(f"{model}-dp-model-late-k10-no30")
            if b["n"] and S.clopper_pearson(b["harmful"], b["n"])[1] > 0.05:
                ok = False
            u = self.counts(f"{model}-dp-model-late-bit30")
            if u["n"] and S.clopper_pearson(u["harmful"], u["n"])[0] <= 0.05:
                ok = False
        opt_sign = []
        for model in ("mlp", "cnn"):
            for point in ("early", "late"):
                o = f"{model}-dp-optimizer-{point}"
                if o in self.outcomes:
                    rows = [(r["flips"][0], oc) for r, oc, _ in self.outcomes[o] if r["flips"] and oc in HARMFUL]
                    v31 = sum(1 for f, _ in rows if f[0].endswith("exp_avg_sq") and f[3] == 31)
                    opt_sign.append(f"{o} {v31} of {len(rows)}")
        if opt_sign:
            self.w("The claim is about model weights. In the optimizer state the crucial bit is another one: of the harmful one-flip "
                   "trials, the sign bit (31) of Adam's `exp_avg_sq` accounts for " + ", ".join(opt_sign) + " (claim 2).")
            self.w()
        self.w("What the rule tests: a set bit 30 multiplies a positive normal weight below 1 by 2^128 (to about 10^38) before a "
               "ReLU, so its half of the rule is close to certain by arithmetic; the half that can fail is the bound on 10 flips "
               "sparing bit 30. The tests above are descriptive (Holm within the claim); the rule reads the two CP bounds.")
        self.w()
        self.w("Rule: *reproduced* when in every model 10 flips sparing bit 30 are harmful at most 5 % of the time (upper CP bound) and a "
               "flip of bit 30 is harmful more than 5 % of the time (lower CP bound). Verdict: "
               + self.verdict(rule, f"**{'reproduced' if ok else 'not reproduced'}**") + ".")
        self.w()

    def claim2(self):
        self.w("### 2. The model state is more sensitive than the optimizer state")
        self.w()
        self.w("Estimand: the difference of the harmful rates of one uniformly random bit flip in the model state and in the optimizer "
               "state of one checkpoint. The two campaigns draw trial i's site from one seeded stream, so they are paired by trial id: "
               "exact McNemar test on the trials harmful in one role only, Newcombe's paired interval of the difference, and "
               "P(model > optimizer) under a Jeffreys Dirichlet posterior; stratified method: CMH across fields (sign / exponent / "
               "mantissa, each trial by the field it hit). One family: every training seed, optimizer, point and mode (the dp and mp "
               "pairs of one checkpoint recipe hit the same sites and count twice, which only makes Holm stricter).")
        self.w()
        tests = []
        names = []
        for model in ("mlp", "cnn"):
            for opt in ("adam", "sgdm"):
                for point in ("early", "late"):
                    for mode in ("dp", "mp"):
                        suffix = "" if opt == "adam" else "-sgdm"
                        m, o = f"{model}-{mode}-model-{point}{suffix}", f"{model}-{mode}-optimizer-{point}{suffix}"
                        names += [m, o]
                        if m not in self.outcomes or o not in self.outcomes:
                            continue
                        tests.append(dict(self.compare(m, o), what=f"{model} {mode} {point} {opt}", names=(m, o)))
            for seed in (2, 3):
                m, o = f"{model}-dp-model-late-s{seed}", f"{model}-dp-optimizer-late-s{seed}"
                names += [m, o]
                if m in self.outcomes and o in self.outcomes:
                    tests.append(dict(self.compare(m, o), what=f"{model} dp late adam, training seed {seed}", names=(m, o)))
        self.family(tests)
        for t in tests:
            self.w(f"- {t['what']}: " + diff_line(t, "model", "optimizer") + ".")
        self.w()
        # Adam's second moment: v shrinks / grows / negative
        for model in ("mlp", "cnn"):
            for point in ("early", "late"):
                for mode in ("dp", "mp"):
                    o = f"{model}-{mode}-optimizer-{point}"
                    if o not in self.outcomes:
                        continue
                    groups = {}
                    for r, oc, _ in self.outcomes[o]:
                        if r["flips"]:
                            groups.setdefault(moment_effect(r["flips"][0]), []).append(oc)
                    parts = []
                    for g in MOMENT_EFFECTS:
                        if g in groups or g in ("m", "v shrinks", "v grows", "v negative"):
                            v = groups.get(g, [])
                            x = sum(1 for oc in v if oc in ("critical", "due"))
                            parts.append(f"{'first moment (exp_avg)' if g == 'm' else g} {rate(x, len(v))}")
                    self.w(f"- {o}, harmful by what the flip did: " + "; ".join(parts) + ".")
        self.w()
        self.w(self.role_verdict(tests, names, "the model state", "the optimizer state"))
        self.w()

    def claim3(self):
        self.w("### 3. Data-parallel vs model-parallel training")
        self.w()
        self.w("Estimand: the difference, on the same sites, of the harmful (and outside-band SDC) rates of one uniformly random bit "
               "flip in a dp and in an mp checkpoint of the same model and recipe; for a parallelism effect proper, the same difference "
               "between a fault in one dp replica and a fault in all of them.")
        self.w()
        self.w("Every dp rank loads the same checkpoint, so a fault in it reaches every replica: the all-replica dp arm equals serial "
               "training up to the order of the gradient reduction, and a dp-vs-mp difference there is not a parallelism effect. The "
               "one-replica arm puts the same sites into rank 1's state only. Every replica applies the same averaged update to its own "
               "copy of the weights, so what a fault changes in one replica's weights stays there until a restart loads rank 0's checkpoint, "
               "and reaches the other replicas only through the gradients it alters. Pairs draw the same sites (same seed and fault space): "
               "exact McNemar tests on the discordant trials.")
        self.w()
        tests, names = [], []
        for model in ("mlp", "cnn"):
            for role in ("model", "optimizer"):
                for point in ("early", "late"):
                    d, m = f"{model}-dp-{role}-{point}", f"{model}-mp-{role}-{point}"
                    names += [d, m]
                    if d in self.outcomes and m in self.outcomes:
                        tests += [self.mcnemar(f"{model} {role} {point}, {oname}", d, m, f, "dp", "mp") for oname, f in PAIRED.items()]
        self.family(tests)
        for t in tests:
            self.w(f"- {t['what']}; McNemar p = {pfmt(t['p'])} (Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])})")
        self.w()
        disc, pairs = 0, 0
        for model in ("mlp", "cnn"):
            for role in ("model", "optimizer"):
                for point in ("early", "late"):
                    d, m = f"{model}-dp-{role}-{point}", f"{model}-mp-{role}-{point}"
                    if d in self.outcomes and m in self.outcomes:
                        n, _, _, oa, ob = self.paired(d, m, lambda oc: oc in HARMFUL)
                        disc, pairs = disc + oa + ob, pairs + n
        if pairs:
            self.w(f"What a non-significant test bounds: dp and mp differ in harmful outcome in {disc} of {pairs} paired trials, so the "
                   f"share of faults whose harm depends on the layout is at most {100 * S.clopper_pearson(disc, pairs)[1]:.1f} % (95 % CP "
                   "upper bound), and so is any difference of the harmful rates. A pair is the same position in two different golden "
                   "runs (dp and mp train separately), holding different values: a discordant pair can come from the values, not the "
                   "parallelism.")
            self.w()
        rtests = []
        for model in ("mlp", "cnn"):
            for role in ("model", "optimizer"):
                one, allr = f"{model}-dp1-{role}-late", f"{model}-dp-{role}-late"
                names += [one, allr]
                if one in self.outcomes and allr in self.outcomes:
                    rtests += [self.mcnemar(f"{model} {role}, {oname}", one, allr, f, "one replica", "all replicas", "one", "all")
                               for oname, f in PAIRED.items()]
                    line = self.replica_line(one, one, allr)
                    if line:
                        self.w(line)
        self.family(rtests)
        for t in rtests:
            self.w(f"- {t['what']}; McNemar p = {pfmt(t['p'])} (Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])})")
        self.w()
        waiting = self.verdict(names, "")
        if waiting:
            self.w(f"Verdict: {waiting}.")
        else:
            sig = [t for t in tests if t["holm"] < ALPHA]
            rsig = [t for t in rtests if t["holm"] < ALPHA]
            self.w(f"Rule: dp and mp *differ* where a paired test is significant after Holm. {len(sig)} of {len(tests)} dp-vs-mp tests and "
                   f"{len(rsig)} of {len(rtests)} one-vs-all-replica tests are. Verdict on the seed studies' dp-vs-mp difference: "
                   f"**{'reproduced' if sig else 'not reproduced'}** for the checkpoint fault model; a parallelism effect proper is "
                   "measured only by the one-replica arm.")
        self.w()

    def claim4(self):
        self.w("### 4. Early vs late injection")
        self.w()
        self.w("Estimand: the difference, on the same sites, of the harmful (and outside-band SDC) rates of one uniformly random bit flip "
               "in the checkpoint after epoch 1 and in the one after epoch 2 (paired: exact McNemar).")
        self.w()
        tests, names = [], []
        for model in ("mlp",):
            for mode in ("dp", "mp"):
                for role in ("model", "optimizer"):
                    e, l = f"{model}-{mode}-{role}-early", f"{model}-{mode}-{role}-late"
                    names += [e, l]
                    if e in self.outcomes and l in self.outcomes:
                        tests += [self.mcnemar(f"{model} {mode} {role}, {oname}", e, l, f, "early", "late") for oname, f in PAIRED.items()]
        self.family(tests)
        for t in tests:
            self.w(f"- {t['what']}; McNemar p = {pfmt(t['p'])} (Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])})")
        self.w()
        self.w("The CNN's early checkpoint is not in the grid: for the CNN the claim is **not testable** here.")
        waiting = self.verdict(names, "")
        if waiting:
            self.w(f"Verdict (MLP): {waiting}.")
        else:
            sig = [t for t in tests if t["holm"] < ALPHA]
            self.w(f"Verdict (MLP): **{'reproduced' if sig else 'not reproduced'}**: {len(sig)} of {len(tests)} paired tests significant after Holm.")
        self.w()

    def seeds(self):
        self.w("### Training seeds")
        self.w()
        self.seed_lines([(f"{model} dp late {role}", [(1, f"{model}-dp-{role}-late"), (2, f"{model}-dp-{role}-late-s2"),
                                                      (3, f"{model}-dp-{role}-late-s3")])
                         for model in ("mlp", "cnn") for role in ("model", "optimizer")])

    def budget(self):
        self.w("## Trial budget: interval-width targets first")
        self.w()
        self.w("Each family's trial count is the smallest n whose 95 % Clopper-Pearson interval reaches the target width at the "
               "anticipated rate (`scripts/study/dp_vs_mp.py plan`), rounded up to a multiple of 10; the last column is what the "
               "records reached.")
        self.w()
        self.w("| family | target | planned n | widest 95 % CP interval reached (harmful rate) |")
        self.w("|---|---|---:|---|")
        self.width_rows(P.TARGETS, "harmful")
        self.w()
        # an mp trial (4 stages) costs more than a dp one, a one-replica dp trial (the replicas compared) too
        self.timing(lambda a: f"{a.model} {a.mode}" + (" one-replica" if a.replica else ""))
        self.w()

    def render(self):
        self.header()
        self.budget()
        self.goldens()
        self.noise()
        self.campaigns()
        self.fit()
        self.findings()
        return "\n".join(self.out) + "\n"


def main(args):
    plan_name, gold, data = load(os.path.abspath(args.publish), os.path.abspath(args.live) if args.live else None)
    text = Report(plan_name, gold, data, os.path.join(ROOT, args.build, "bin", "ckpt-flip")).render()
    from dp_vs_mp import write_or_die  # noqa: E402
    write_or_die(args.out, text)
    print(f"report: {args.out} ({len(data)} arms with records)")
