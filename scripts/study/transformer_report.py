"""docs/results/transformer.md from the transformer study's published records (method: docs/design/study-method.md).

Reads PUBLISH/goldens.json, PUBLISH/rates.json and PUBLISH/NAME.jsonl.gz (one per finished arm); with --live DIR
also the records of arms still running there (marked as such: no verdict is drawn from an arm that has not
reached its planned size). The MLP/CNN comparison reads docs/results/dp-vs-mp-study/ the same way. Every number
is computed here from the records. The outcome classes, the noise band and the loss-curve classes are the
dp-vs-mp study's (scripts/study/report.py), on the validation loss in bits per byte (lower is better).
"""
import math
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gpt_plan as G  # noqa: E402
import report as R  # noqa: E402
import stats as S  # noqa: E402

DUE = R.DUE
ALPHA = 0.05
HARMFUL = R.HARMFUL
INCORRECT = (*R.OUTSIDE, "due")   # PVF's "incorrect output": outside the noise band, or no output
PAIRED_OUTCOMES = (("harmful", lambda oc: oc in HARMFUL), ("incorrect", lambda oc: oc in INCORRECT))
CURVES = R.CURVES
rate, pct, pfmt = R.rate, R.pct, R.pfmt


# ---------------------------------------------------------------- loading

def load(publish, live):
    from transformer import load_rates, slim  # noqa: E402
    plan_name, gold, data = R.load(publish, live, G.arms, slim, study="transformer")
    return plan_name, gold, data, load_rates(publish)


# ---------------------------------------------------------------- classification

def golden_key(arm):
    return (arm.mode, arm.seed, arm.point)


class Bands(R.NoiseBands):
    """The noise bands on Δ = trial bpb − golden-resume bpb: late, pooled over dp, pp and tp of seed 1; early, dp's own;
    another seed's golden widens the pooled band by its own noise. Loss-curve bands per golden and window."""

    def key(self, arm):
        return golden_key(arm)

    def delta(self, r):
        return r.get("delta")

    def pooled(self, point):
        vals = []
        for mode in (G.MODES if point == "late" else ("dp",)):
            vals += self.deltas.get((mode, 1, point), [])
        return vals

    def band(self, arm):
        vals = self.pooled(arm.point) + (self.deltas.get(golden_key(arm), []) if arm.seed != 1 else [])
        return (min(vals), max(vals)) if vals else None


def classify(r, band):
    """The dp-vs-mp study's classes on bits per byte: outside the band is an SDC, critical when more than
    CRITICAL_BPB worse than golden."""
    c = r.get("class")
    if c in DUE:
        return "due"
    if c == "unreadable_summary":
        return "unknown"
    d = r.get("delta")
    if band is None:  # no noise runs yet: only what lies past the critical threshold is known
        return "critical" if d is not None and d > G.CRITICAL_BPB else "unknown"
    if d is not None and (d < band[0] or d > band[1]):
        return "critical" if d > G.CRITICAL_BPB else "sdc"
    return "bitwise_masked" if c == "bit_masked" else "noise_changed"


def design_of(arm):
    """How an arm samples, where it is not the uniform estimand (one bit uniformly among the targeted state's bits)."""
    if arm.strata == "bit":
        return "per-bit strata, equal allocation"
    if arm.strata == "tensor":
        return "per-tensor strata, equal allocation"
    if arm.bits is not None:
        return f"bit {arm.bits} only" if arm.bits.isdigit() else f"bits {arm.bits} only"
    return ""


def uniform(arm):
    """A fault campaign whose rates are the uniform estimand."""
    return arm.kind == "campaign" and arm.family != "noise" and not design_of(arm)


def msb_was_set(flip):
    """Whether the flipped exponent MSB was 1 before the flip (bf16 bit 14, fp32 bit 30): |old| >= 2, or old not finite
    (Inf and NaN have every exponent bit set; the records write them as null). The flip clears it then, else sets it."""
    old = flip[4]
    return old is None or not math.isfinite(old) or abs(old) >= 2.0


def tensor_of(dataset):
    """'/model/h.0.ln_1.weight' or '/optimizer/h.0.ln_1.weight/master' -> 'h.0.ln_1.weight'."""
    parts = dataset.strip("/").split("/")
    return parts[1] if len(parts) > 1 else parts[0]


def tensor_group(name):
    """The PVF table's groups: embeddings, attention, MLP, LayerNorm gains, LayerNorm biases."""
    if name.startswith(("wte", "wpe")):
        return "embeddings"
    if ".attn." in name:
        return "attention"
    if ".mlp." in name:
        return "MLP"
    if "ln_" in name:
        return "LayerNorm gains" if name.endswith(".weight") else "LayerNorm biases"
    return "other"


def stratum_counts(rows, key):
    """{key(first flip): [n, incorrect, harmful]} over the (record, outcome) pairs whose record has a flip: the per-bit,
    per-tensor and width tables count their strata with it."""
    out = {}
    for r, o in rows:
        if r.get("flips"):
            e = out.setdefault(key(r["flips"][0]), [0, 0, 0])
            e[0] += 1
            e[1] += o in INCORRECT
            e[2] += o in HARMFUL
    return out


def pvf_table(rows, space):
    """Per-tensor PVF from (record, outcome) pairs of a per-tensor campaign: {tensor: dict(group, bits, n, incorrect,
    harmful)}, and per group the bits-weighted rate {group: stratified_rate + counts}. `space` is the campaign's
    fault space (stored bits per tensor), which weighs a group's tensors."""
    per = {}
    bits = {tensor_of(k): v for k, v in ((space or {}).get("by", {}).get("tensor", {}) or {}).items()}
    for t, b in bits.items():
        per[t] = {"group": tensor_group(t), "bits": b, "n": 0, "incorrect": 0, "harmful": 0}
    for t, (n, x, h) in stratum_counts(rows, lambda f: tensor_of(f[0])).items():
        e = per.setdefault(t, {"group": tensor_group(t), "bits": 0, "n": 0, "incorrect": 0, "harmful": 0})
        e["n"], e["incorrect"], e["harmful"] = n, x, h
    groups = {}
    for t, e in per.items():
        groups.setdefault(e["group"], []).append(t)
    gout = {}
    for g, ts in groups.items():
        sampled = [t for t in ts if per[t]["n"]]
        gb = sum(per[t]["bits"] for t in ts)
        entry = {"tensors": len(ts), "sampled": len(sampled), "bits": gb, "n": sum(per[t]["n"] for t in ts),
                 "incorrect": sum(per[t]["incorrect"] for t in ts), "harmful": sum(per[t]["harmful"] for t in ts)}
        if sampled and all(per[t]["bits"] for t in sampled):
            strata = {t: (per[t]["incorrect"], per[t]["n"]) for t in sampled}
            entry["pvf"] = S.stratified_rate(strata, {t: per[t]["bits"] for t in sampled}, draws=40000)
        gout[g] = entry
    return per, gout


# ---------------------------------------------------------------- the report

class Report(R.ReportBase):
    def __init__(self, plan_name, gold, data, rates, mlp=None):
        self.plan, self.gold, self.data, self.rates, self.mlp = plan_name, gold, data, rates, mlp
        self.arms = G.arms(plan_name)
        self.bands = Bands(data)
        self.out = []
        # A mode without its own noise curves (pp, tp early) takes dp's.
        self.classify_arms(classify, lambda bands, a: bands.curve_band(a) or bands.curve_band(a._replace(mode="dp")),
                           lambda r, band: r.get("delta") is not None and r["delta"] > (band[1] if band else 0))
        self.plots = []

    def noise_of(self, name):
        """The noise arms whose runs set the band of arm NAME: the pooled seed-1 late band (dp, pp, tp) or dp's early one,
        and another seed's own."""
        arm = next((a for a in self.arms if a.name == name), None)
        if arm is None or arm.family == "noise":
            return []
        return [a.name for a in self.arms if a.family == "noise" and a.point == arm.point
                and (a.seed == 1 or a.seed == arm.seed) and (arm.point == "late" or a.mode == "dp")]

    def verdict(self, names, ok_text):
        """The shared rule, waiting also for the noise arms that set the bands of NAMES."""
        names = list(names)
        return super().verdict(names + [n for nm in names for n in self.noise_of(nm)], ok_text)

    # ------------------------------------------------------------ sections
    def header(self):
        self.opening("The transformer study: bit flips in a bf16 GPT's weights, fp32 masters and AdamW moments",
                     "scripts/study/transformer.py", "docs/results/transformer-study/",
                     "../design/study-method.md#the-transformer-study", "question")
        self.w(f"The model: ckpt-train's gpt, `{G.recipe(self.plan, 'dp')}`, trained in bf16 (bf16 weights and activations, fp32 "
               f"accumulation, fp32 master weights and AdamW moments) for {G.EPOCHS} epochs with a checkpoint after each, on "
               f"{G.RANKS} ranks: dp replicas, pp stages (`--micro-batches 2`) or tp ranks. Every trial resumes the checkpoint after "
               f"epoch {G.POINT_EPOCH['early']} (*early*) or {G.POINT_EPOCH['late']} (*late*) to epoch {G.EPOCHS} and is classified on the "
               f"validation loss in bits per byte (`test_bpb`, lower is better) on {self.gold['test_limit'] if self.gold else G.TEST_LIMIT} "
               f"windows. Machine: {platform.machine()}, {os.cpu_count()} cores.")
        self.w()

    def budget(self):
        self.w("## CPU budget")
        self.w()
        if not self.rates:
            self.w("No measured per-trial rate yet (`scripts/study/transformer.py rate`).")
            self.w()
            return
        from transformer import budget
        r = self.rates["rates"]
        self.w(f"Measured by `scripts/study/transformer.py rate` ({self.rates['measured']}; {self.rates['trials']} trials per mode and point, "
               f"each a real campaign trial: copy, flip, `mpiexec -n {self.rates['ranks']} ckpt-train resume`, classify; load average "
               f"{self.rates['load_average'][0]} on {self.rates['cores']} cores while it ran). CPU seconds are those of the processes, "
               "which a shared machine's load does not inflate; wall seconds are what that load gave.")
        self.w()
        self.w("| mode, point | CPU-s per trial | wall-s per trial |")
        self.w("|---|---:|---:|")
        for k, v in sorted(r.items()):
            self.w(f"| {k} | {v['cpu_seconds']:.1f} | {v['wall_seconds']:.1f} |")
        self.w()
        rows = budget(self.arms, self.rates)
        fam = {}
        for a, c, _ in rows:
            f = fam.setdefault(a.family, [0, 0])
            f[0] += a.n
            f[1] += c
        cpu = sum(c for _, c, _ in rows)
        self.w("| family | trials | CPU-h |")
        self.w("|---|---:|---:|")
        for f, (n, c) in fam.items():
            self.w(f"| {f} | {n} | {c / 3600:.1f} |")
        self.w(f"| **all** | **{sum(a.n for a in self.arms)}** | **{cpu / 3600:.1f}** |")
        self.w()
        cores = self.rates.get("cores") or 2
        self.w(f"The study: {cpu / 3600:.1f} CPU-hours, {cpu / 3600 / cores:.1f} hours of the {cores}-core machine with every core "
               "free. Trial counts come from interval-width targets (`scripts/study/transformer.py plan`); a per-bit or per-tensor "
               "target is per stratum, so its width is the widest over the strata:")
        self.w()
        self.w("| family | target | planned n | widest 95 % CP interval reached (incorrect-output rate) |")
        self.w("|---|---|---|---|")
        self.target_widths()
        self.w()
        from transformer import arm_cost_key
        self.timing(arm_cost_key, {k: v["cpu_seconds"] for k, v in self.rates["rates"].items()})
        self.w()

    def target_widths(self):
        """Per family with a width target: the planned n (per stratum where the arms are stratified) and the widest 95 % CP
        interval of the incorrect-output rate reached, per stratum for per-bit and per-tensor arms."""
        for fam, t in G.TARGETS.items():
            if "width" not in t:
                continue
            arms = [a for a in self.arms if a.family == fam]
            ns = sorted({a.n for a in arms})
            planned = (f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}-{ns[-1]}") + " per arm"
            widths, per_stratum = [], None
            for a in arms:
                if a.name not in self.outcomes:
                    continue
                if a.strata in ("bit", "tensor"):
                    per = stratum_counts(((r, o) for r, o, _ in self.outcomes[a.name]),
                                         (lambda f: f[3]) if a.strata == "bit" else (lambda f: tensor_of(f[0])))
                    widths += [100 * S.cp_width(x, n) for n, x, _ in per.values()]
                    strata = (16 if a.role == "model" else 32) if a.strata == "bit" else len(
                        ((self.data[a.name].get("space") or {}).get("by") or {}).get("tensor") or {})
                    if strata:
                        per_stratum = a.n // strata
                else:
                    c = self.counts(a.name)
                    widths.append(100 * S.cp_width(c["incorrect"], c["n"]))
            reached = f"{max(widths):.1f} points" if widths else "not run yet"
            self.w(f"| {fam} | {t['why']} | {(f'{per_stratum} per stratum; ' if per_stratum else '') + planned} | {reached} |")

    def goldens(self):
        if not self.gold:
            return
        self.w("## Golden runs")
        self.w()
        self.w(f"| golden | validation bpb per epoch (first {self.gold['test_limit']:,} windows) | the first 4,104 validation windows | train wall |")
        self.w("|---|---|---:|---:|")
        for name, g in sorted(self.gold["goldens"].items()):
            bpb = " ".join(f"{e['test_bpb']:.3f}" for e in g["epochs"] if "test_bpb" in e)
            full = g.get("full_test_bpb")
            self.w(f"| {name} | {bpb} | {full:.3f} | {g['train_seconds']:.0f} s |" if full is not None else f"| {name} | {bpb} | - | {g['train_seconds']:.0f} s |")
        self.w()
        self.w(f"A bigram model of the same split gets {G.BIGRAM_BPB} bits per byte, a unigram {G.UNIGRAM_BPB} ([gpt-cpu results](2026-11-27-gpt-cpu.md)).")
        self.w()
        self.reproduced_line()

    def noise(self):
        self.w("## Noise baseline")
        self.w()
        self.w("Δ = a fault-free resume's final validation bpb minus the golden resume's (positive: worse). *ulp* = a flip of bit 0 of "
               "one random bf16 weight (one unit in the last place, for the one step before its master rewrites it), *order* = the unaltered checkpoint resumed with another data "
               "order (`--shuffle-seed`). The late band is [min, max] of the seed-1 runs pooled over dp, pp and tp; the early band is dp's.")
        self.w()
        self.w("| point | n | band (bpb) | confidence (95 % content) | per arm: n, range |")
        self.w("|---|---:|---|---:|---|")
        for point in ("early", "late"):
            vals = self.bands.pooled(point)
            if not vals:
                continue
            parts = []
            for a in self.arms:
                if a.family == "noise" and a.point == point and a.seed == 1 and a.name in self.data:
                    v = [r["delta"] for r in self.data[a.name]["recs"] if r.get("delta") is not None and r.get("class") not in DUE]
                    if v:
                        parts.append(f"{a.name} {len(v)}, [{min(v):+.5f}, {max(v):+.5f}]")
            self.w(f"| {point} | {len(vals)} | [{min(vals):+.5f}, {max(vals):+.5f}] | {S.tolerance_confidence(len(vals)):.3f} | {'; '.join(parts)} |")
        self.w()
        pooled = self.bands.pooled("late")
        rows = []
        for seed in G.SEEDS[1:]:
            v = self.bands.deltas.get(("dp", seed, "late"), [])
            if v and pooled:
                inside = sum(1 for x in v if min(pooled) <= x <= max(pooled))
                rows.append(f"| seed {seed} | {len(v)} | [{min(v):+.5f}, {max(v):+.5f}] | {inside}/{len(v)} inside [{min(pooled):+.5f}, {max(pooled):+.5f}] |")
        if rows:
            self.w("Noise of the other seeds' goldens (dp, late) against the pooled seed-1 band (where they fall outside, their own range "
                   "widens the band for their campaigns):")
            self.w()
            self.w("| golden | n | range (bpb) | inside the seed-1 band |")
            self.w("|---|---:|---|---|")
            for r in rows:
                self.w(r)
            self.w()

    def campaigns(self):
        self.w("## Campaigns: outcome classes against the noise band")
        self.w()
        self.w("Rates are of one bit flipped uniformly at random among the stored bits of the targeted state (the primary estimand), "
               "except in the arms marked with their design (per-bit or per-tensor strata with equal allocation, or only some bits), "
               "whose pooled rates are of that design; 95 % Clopper-Pearson intervals. **SDC** = Δ outside the band, **critical** = an SDC more "
               f"than {G.CRITICAL_BPB} bpb worse than golden, **DUE** = crash, hang or NaN/Inf, **harmful** = critical or DUE, "
               "**incorrect** = SDC or DUE (the PVF's \"incorrect output\"), **bitwise changed** = of the trials that ran to the end (not "
               "DUE), the share whose final weights or masters (rank 0's) differ from golden's, **in band** = changed, Δ inside the band.")
        self.w()
        self.outcome_rows(lambda band: f"[{band[0]:+.5f}, {band[1]:+.5f}]", "band (bpb)", design_of)
        self.critical_severity()
        self.band_sensitivity(lambda band: f"[{band[0]:+.5f}, {band[1]:+.5f}]")
        self.post_stratified([a for a in self.arms if a.kind == "campaign" and a.flips == 1 and a.bits is None and a.strata == "none"
                              and a.family != "noise"],
                             lambda a: R.BF16_FIELDS if a.role == "model" else R.F32_FIELDS, "bf16 (weights) or f32 (masters, moments)")
        self.w("Loss-curve classes of the resumed trials (the training loss every 10 steps against the golden resume's curve and the "
               "noise runs' per-window band; definitions in the design; the four failure modes are columns 2-5):")
        self.w()
        self.curve_rows()

    def critical_severity(self):
        """How far the critical SDCs fall: at or past the n-gram baselines, a model that has lost what it learned."""
        rows = []
        for a in self.fault_arms():
            vals = [r["metric"] for r, o, _ in self.outcomes.get(a.name, []) if o == "critical" and r.get("metric") is not None]
            if vals:
                rows.append(f"| {a.name} | {len(vals)} | {sum(v >= G.BIGRAM_BPB for v in vals)} | {sum(v >= G.UNIGRAM_BPB for v in vals)} "
                            f"| {max(vals):.3f} |")
        if not rows:
            return
        harder = sorted(g["epochs"][-1]["test_bpb"] - g["full_test_bpb"] for g in (self.gold or {}).get("goldens", {}).values()
                        if g.get("full_test_bpb") is not None and g.get("epochs") and "test_bpb" in g["epochs"][-1])
        note = (f"; the trials' windows read {harder[0]:.3f}-{harder[-1]:.3f} bpb harder than the whole split, by the goldens' final "
                "epochs" if harder else "")
        self.w(f"How far the critical SDCs fall: final bpb at or past the split's bigram ({G.BIGRAM_BPB}) and unigram "
               f"({G.UNIGRAM_BPB}) baselines, a model that has lost its context or everything it learned (the baselines are over "
               f"the whole validation split{note}):")
        self.w()
        self.w("| campaign | critical | ≥ bigram | ≥ unigram | worst bpb |")
        self.w("|---|---:|---:|---:|---:|")
        for r in rows:
            self.w(r)
        self.w()

    def per_bit(self):
        self.w("## Per-bit sensitivity")
        self.w()
        self.w("Each bit position a stratum of its own (equal allocation, one flip per trial, dp, late). bf16 (the model role): sign 15, "
               "exponent 7-14 (**bit 14 its MSB**), mantissa 0-6; fp32 (masters, moments): sign 31, exponent 23-30, mantissa 0-22. "
               "Cells: incorrect (SDC or DUE) / n, harmful in parentheses; the optimizer's split into m and v, v by what the flip did "
               "to |v| (a bit that was 0 grows it, a bit that was 1 shrinks it; the sign bit makes it negative).")
        self.w()
        series = {}
        for role, nbits in (("model", 16), ("master", 32), ("optimizer", 32)):
            name = f"dp-{role}-late-bits"
            if name not in self.outcomes:
                continue
            mark = "" if self.complete(name) else f" (running, {len(self.outcomes[name])} of {next(a.n for a in self.arms if a.name == name)})"
            by = stratum_counts(((r, o) for r, o, _ in self.outcomes[name]),
                                lambda f: (f[3], "all" if role != "optimizer" else R.moment_effect(f)))
            kinds = ("all",) if role != "optimizer" else tuple(k for k in R.MOMENT_EFFECTS if k in ("m", "v shrinks", "v grows", "v negative")
                                                                 or any(kk == k for _, kk in by))
            self.w(f"**{role}** (`{name}`{mark}):")
            self.w()
            self.w("| bit | " + " | ".join(kinds) + " |")
            self.w("|---:|" + "---|" * len(kinds))
            for bit in range(nbits - 1, -1, -1):
                cells = []
                for k in kinds:
                    n, x, h = by.get((bit, k), (0, 0, 0))
                    cells.append(f"{x}/{n} ({h}) {R.ci(x, n)}" if n else "-")
                self.w(f"| {bit}{' (exp. MSB)' if bit == (14 if nbits == 16 else 30) else ''} | " + " | ".join(cells) + " |")
            self.w()
            for k in kinds:
                series[f"{role}{'' if k == 'all' else ' ' + k}"] = (nbits, {b: by.get((b, k), (0, 0, 0)) for b in range(nbits)})
        if not series:
            self.w("No per-bit arm has records yet.")
            self.w()
        self.plot_bits(series)

    def pvf(self):
        self.w("## Per-tensor vulnerability (PVF)")
        self.w()
        self.w("The parameter vulnerability factor of Jiao et al. (Meta, [arXiv 2405.01741](https://arxiv.org/abs/2405.01741)): the "
               "probability that a corruption of a parameter gives an incorrect output; here one bit flipped uniformly among a tensor's "
               "stored bits, resumed to the end of training, an incorrect output being an SDC outside the noise band or a DUE. Each "
               "tensor a stratum (equal allocation); a group's PVF weighs its tensors by their stored bits (Jeffreys-mixture interval).")
        self.w()
        any_arm = False
        for role in ("model", "master"):
            name = f"dp-{role}-late-tensors"
            if name not in self.outcomes:
                continue
            any_arm = True
            per, groups = pvf_table([(r, o) for r, o, _ in self.outcomes[name]], self.data[name].get("space"))
            mark = "" if self.complete(name) else " (running: partial)"
            self.w(f"**{role}** (`{name}`{mark}), by group:")
            self.w()
            self.w("| group | tensors (sampled) | stored bits | n | incorrect | harmful | PVF [95 %] |")
            self.w("|---|---:|---:|---:|---:|---:|---|")
            for g in ("embeddings", "attention", "MLP", "LayerNorm gains", "LayerNorm biases", "other"):
                if g not in groups:
                    continue
                e = groups[g]
                pv = e.get("pvf")
                self.w(f"| {g} | {e['tensors']} ({e['sampled']}) | {e['bits']:.0f} | {e['n']} | {e['incorrect']} | {e['harmful']} | "
                       + (f"{100 * pv['point']:.1f}% [{100 * pv['lo']:.1f}, {100 * pv['hi']:.1f}] |" if pv else "- |"))
            self.w()
            self.w("| tensor | group | stored bits | n | incorrect (PVF, 95 % CP) | harmful |")
            self.w("|---|---|---:|---:|---|---:|")
            for t, e in sorted(per.items(), key=lambda kv: (-(kv[1]["incorrect"] / kv[1]["n"]) if kv[1]["n"] else 1, kv[0])):
                self.w(f"| {t} | {e['group']} | {e['bits']:.0f} | {e['n']} | {rate(e['incorrect'], e['n'])} | {e['harmful']} |")
            self.w()
            self.plot_pvf(role, groups)
        if not any_arm:
            self.w("No per-tensor arm has records yet.")
            self.w()

    # ------------------------------------------------------------ plots
    def plot_bits(self, series):
        if self.no_plots or not series:
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(len(series), 1, figsize=(9, 2.2 * len(series)), squeeze=False)
        for ax, (label, (nbits, by)) in zip(axes[:, 0], series.items()):
            xs = list(range(nbits))
            p = [by[b][1] / by[b][0] if by[b][0] else 0 for b in xs]
            lo = [S.clopper_pearson(by[b][1], by[b][0])[0] if by[b][0] else 0 for b in xs]
            hi = [S.clopper_pearson(by[b][1], by[b][0])[1] if by[b][0] else 0 for b in xs]
            msb = 14 if nbits == 16 else 30
            ax.bar(xs, p, color=["tab:red" if b == msb else "tab:blue" for b in xs])
            ax.errorbar(xs, p, yerr=[[a - b for a, b in zip(p, lo)], [b - a for a, b in zip(p, hi)]], fmt="none", ecolor="black", lw=0.8)
            ax.set_ylim(0, 1)
            ax.set_ylabel("incorrect")
            ax.set_title(f"{label}: SDC or DUE per bit (exponent MSB red, 95 % CP)", fontsize=9)
        axes[-1, 0].set_xlabel("bit position")
        fig.tight_layout()
        self.save(fig, "transformer-bits.png", "Per bit: the rate of an incorrect output (SDC outside the band, or DUE)")

    def plot_pvf(self, role, groups):
        if self.no_plots:
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        gs = [g for g in ("embeddings", "attention", "MLP", "LayerNorm gains", "LayerNorm biases") if g in groups and groups[g].get("pvf")]
        if not gs:
            return
        fig, ax = plt.subplots(figsize=(7, 3))
        p = [groups[g]["pvf"]["point"] for g in gs]
        ax.bar(gs, p, color="tab:blue")
        ax.errorbar(gs, p, yerr=[[x - groups[g]["pvf"]["lo"] for x, g in zip(p, gs)], [groups[g]["pvf"]["hi"] - x for x, g in zip(p, gs)]],
                    fmt="none", ecolor="black", lw=0.8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("PVF")
        ax.set_title(f"PVF by tensor group, {role} role (95 % interval)", fontsize=9)
        fig.tight_layout()
        self.save(fig, f"transformer-pvf-{role}.png", f"PVF by tensor group, {role} role")

    def plot_outcomes(self):
        if self.no_plots:
            return
        names = [a.name for a in self.arms if a.kind == "campaign" and a.family != "noise" and a.name in self.outcomes]
        if not names:
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 0.28 * len(names) + 1.2))
        left = [0.0] * len(names)
        for k, color in (("due", "black"), ("critical", "tab:red"), ("sdc", "tab:orange"), ("noise_changed", "tab:gray"), ("bitwise_masked", "tab:green")):
            v = []
            for nm in names:
                c = self.counts(nm)
                v.append(c[k] / c["n"] if c["n"] else 0)
            ax.barh(names, v, left=left, color=color, label=k.replace("_", " "))
            left = [a + b for a, b in zip(left, v)]
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout()
        self.save(fig, "transformer-outcomes.png", "Outcome classes per campaign")

    def save(self, fig, name, caption):
        fig.savefig(os.path.join(self.plot_dir, name), dpi=110)
        import matplotlib.pyplot as plt
        plt.close(fig)
        self.plots.append(name)
        self.w(f"![{caption}]({name})")
        self.w()

    # ------------------------------------------------------------ findings
    def findings(self):
        self.w("## Findings")
        self.w()
        self.w("Each question, the estimand measured for it, the tests (each question's tests one family, Holm-adjusted; BH q-values "
               "alongside) and a verdict: *holds*, *does not hold*, or *pending* (its arms are not complete).")
        self.w()
        self.crucial_bit()
        self.state()
        self.modes()
        self.early_late()
        self.kflips()
        self.tensors()
        self.failure_modes()
        self.seeds()
        self.against_mlp()

    def crucial_bit(self):
        self.w("### 1. The crucial-bit claim in bf16: flips are absorbed unless the exponent MSB is hit")
        self.w()
        self.w("The seed studies of the MLP/CNN study (Rojas, Pérez, Meneses et al.) found fp32 models tolerant of flips unless bit 30, "
               "the exponent's MSB, is hit. bf16 keeps fp32's 8-bit exponent and drops 16 mantissa bits, so its bit 14 plays bit 30's part "
               "(setting it multiplies a normal weight of magnitude below 1 by 2^128; one in [1, 2) becomes Inf or NaN, a zero or subnormal "
               "one a value in [2, 4)) and a larger share of its bits are exponent bits (8 of 16 "
               "against 8 of 32).")
        self.w()
        self.w("Estimands: the harmful rate of a flip of bf16 bit 14 of a uniformly chosen weight (and of fp32 bit 30 of a master), "
               "split by the sign of the exponent change; 1, 10 and 100 flips in the bf16 weights, anywhere and sparing bit 14.")
        self.w()
        names, tests = [], []
        for name, msb in (("dp-model-late-bit14", 14), ("dp-master-late-bit30", 30)):
            names.append(name)
            if name not in self.outcomes:
                continue
            rows = self.outcomes[name]
            up = [o for r, o, _ in rows if r["flips"] and not msb_was_set(r["flips"][0])]
            down = [o for r, o, _ in rows if r["flips"] and msb_was_set(r["flips"][0])]
            c = self.counts(name)
            hu, hd = sum(o in HARMFUL for o in up), sum(o in HARMFUL for o in down)
            line = (f"- `{name}`: harmful {rate(c['harmful'], c['n'])}, incorrect {rate(c['incorrect'], c['n'])}; the flip set bit {msb} "
                    f"(|w| grows by 2^128, or to Inf/NaN) {rate(hu, len(up))} harmful; cleared it (|w| shrinks to almost 0) ")
            if up and down:  # a test with an empty group says nothing and would only weaken the family's others
                p = S.fisher_exact(hu, len(up) - hu, hd, len(down) - hd)
                tests.append({"what": f"{name}: magnitude up vs down", "p": p})
                self.w(line + f"{rate(hd, len(down))}; Fisher p = {pfmt(p)}.")
            else:
                self.w(line + f"in {len(down)} trials (none of the drawn weights has |w| >= 2, where the MSB is set): no test.")
        for k in (1, 10, 100):
            a_name = "dp-model-late" if k == 1 else f"dp-model-late-k{k}"
            b_name = f"dp-model-late-k{k}-nomsb"
            names += [a_name, b_name]
            if a_name in self.outcomes and b_name in self.outcomes:
                n, xa, xb, oa, ob = self.paired(a_name, b_name, lambda oc: oc in HARMFUL)
                p = S.mcnemar_exact(oa, ob)
                tests.append({"what": f"{k} flip(s): anywhere vs sparing bit 14", "p": p})
                pairs = {r["trial"] for r, _, _ in self.outcomes[b_name]}
                hit = sum(1 for r, _, _ in self.outcomes[a_name] if r["trial"] in pairs and any(f[3] == 14 for f in r["flips"]))
                self.w(f"- {k} flip(s) in the bf16 weights, over the {n} trials of both arms (the same elements, other bits): anywhere "
                       f"{rate(xa, n)} harmful ({hit} trials hit bit 14); sparing bit 14 {rate(xb, n)}; harmful in only one: {oa} "
                       f"anywhere, {ob} sparing; McNemar p = {pfmt(p)}.")
        if "dp-model-late" in self.outcomes:
            rows = self.outcomes["dp-model-late"]
            x14 = [o for r, o, _ in rows if r["flips"] and r["flips"][0][3] == 14]
            xo = [o for r, o, _ in rows if r["flips"] and r["flips"][0][3] != 14]
            self.w(f"- `dp-model-late` (uniform): harmful with bit 14 {rate(sum(o in HARMFUL for o in x14), len(x14))}, any other bit "
                   f"{rate(sum(o in HARMFUL for o in xo), len(xo))}.")
        self.family(tests)
        if tests:
            self.w()
            for t in tests:
                self.w(f"  - {t['what']}: p = {pfmt(t['p'])}, Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])}")
        self.w()
        rule = ["dp-model-late-bit14", "dp-model-late-k10-nomsb"]
        if self.verdict(rule, ""):
            self.w("Verdict: " + self.verdict(rule, "") + ".")
        else:
            b, u = self.counts("dp-model-late-k10-nomsb"), self.counts("dp-model-late-bit14")
            holds = S.clopper_pearson(b["harmful"], b["n"])[1] <= 0.05 and S.clopper_pearson(u["harmful"], u["n"])[0] > 0.05
            self.w("Rule: *holds* when 10 flips sparing bit 14 are harmful at most 5 % of the time (upper CP bound) and a flip of bit 14 "
                   f"more than 5 % (lower CP bound). Verdict: **{'holds' if holds else 'does not hold'}**.")
        self.w()

    def state(self):
        self.w("### 2. Optimizer state vs model state")
        self.w()
        self.w("Estimand: the difference of the harmful rates of one uniformly random bit flip in two roles of one checkpoint: the "
               "bf16 weights (`model`), the fp32 masters (`master`), the AdamW moments (`optimizer`). The campaigns draw trial i's site "
               "from one seeded stream (the master's element is the model's, its bit 2b or 2b + 1 of the model's bit b), so they are "
               "paired by trial id: exact McNemar test, Newcombe's paired interval, P(first > second) under a Jeffreys Dirichlet "
               "posterior; stratified method: CMH across fields (sign / exponent / mantissa; descriptive, not adjusted). Two families, "
               "Holm-adjusted each: the model-state roles against the optimizer (the claim's rule), and model against master.")
        self.w()
        vs_opt, vs_master, names = [], [], []
        for seed in G.SEEDS:
            for point in ("late", "early"):
                suffix = "" if seed == 1 else f"-s{seed}"
                for a_role, b_role in (("model", "optimizer"), ("master", "optimizer"), ("model", "master")):
                    m, o = f"dp-{a_role}-{point}{suffix}", f"dp-{b_role}-{point}{suffix}"
                    if b_role == "optimizer":
                        names += [m, o]
                    if m not in self.outcomes or o not in self.outcomes:
                        continue
                    (vs_opt if b_role == "optimizer" else vs_master).append(
                        dict(self.compare(m, o), what=f"seed {seed} {point}", roles=(a_role, b_role),
                             names=(m, o, *self.noise_of(m), *self.noise_of(o))))
        for family in (vs_opt, vs_master):
            self.family(family)
            for t in family:
                self.w(f"- {t['what']}: " + R.diff_line(t, *t["roles"]) + ".")
        self.w()
        self.w("AdamW's moments by what the flip did (harmful / n; *v shrinks*: |v| smaller, so the step 1/sqrt(v) grows; *v grows*: "
               "the step shrinks; *v negative*: the sign bit):")
        self.w()
        for a in self.arms:
            if a.role != "optimizer" or a.name not in self.outcomes:
                continue
            groups = {}
            for r, oc, _ in self.outcomes[a.name]:
                if r["flips"]:
                    groups.setdefault(R.moment_effect(r["flips"][0]), []).append(oc)
            parts = [f"{g} {rate(sum(o in HARMFUL for o in groups.get(g, [])), len(groups.get(g, [])))}"
                     for g in R.MOMENT_EFFECTS if g in groups or g in ("m", "v shrinks", "v grows", "v negative")]
            self.w(f"- `{a.name}`: " + "; ".join(parts) + ".")
        self.w()
        self.w(self.role_verdict(vs_opt, names, "a model-state role (bf16 weights or fp32 masters)", "the AdamW moments", claim="holds",
                                 negated="does not hold")
               .replace("Rule:", "Rule (the MLP/CNN study's claim: the model state is the more sensitive):"))
        self.w()

    def modes(self):
        self.w("### 3. dp vs pp vs tp, and one replica")
        self.w()
        self.w("What a flip in a checkpoint reaches: a **dp** flip is in every replica (every rank loads the one file); a **pp** flip "
               "in one stage's shard (the tied `wte` is on both stages: a flip hits one copy); a **tp** flip in one rank's slice of a "
               "sliced weight, or in one rank's copy of a replicated tensor (embeddings, LayerNorms, biases of the row-parallel "
               "Linears), which then differs between ranks; the **one-replica** dp arm puts the dp arm's sites into rank 1's state only. "
               "Every campaign draws trial i from one seeded stream, so the arms are paired by trial id (exact McNemar): one replica vs "
               "all replicas on the same sites; dp, pp and tp on the same draw, which lands in a different place of each layout's fault "
               "space (the pairs stay independent of one another, which is all the test needs).")
        self.w()
        tests, names = [], []
        for role in ("model", "master"):
            dp = f"dp-{role}-late"
            for mode in ("pp", "tp"):
                o = f"{mode}-{role}-late"
                names += [dp, o]
                if dp in self.outcomes and o in self.outcomes:
                    tests += [self.mcnemar(f"{role}, {what}", dp, o, f, "dp", mode) for what, f in PAIRED_OUTCOMES]
            one = f"dp1-{role}-late"
            names += [one]
            if dp in self.outcomes and one in self.outcomes:
                tests += [self.mcnemar(f"{role}, {what}", one, dp, f, "one replica", "all replicas", "one", "all") for what, f in PAIRED_OUTCOMES]
                line = self.replica_line(one, f"`{one}`", dp)
                if line:
                    self.w(line)
            tp = f"tp-{role}-late"
            if tp in self.outcomes:
                sliced = [(r, o) for r, o, _ in self.outcomes[tp] if r.get("flip_extra") and r["flip_extra"][0][1] is not None]
                repl = [(r, o) for r, o, _ in self.outcomes[tp] if not (r.get("flip_extra") and r["flip_extra"][0][1] is not None)]
                self.w(f"- `{tp}`: a flip in a sliced weight (one slice) harmful {rate(sum(o in HARMFUL for _, o in sliced), len(sliced))}; in one "
                       f"rank's copy of a replicated tensor {rate(sum(o in HARMFUL for _, o in repl), len(repl))}.")
        self.family(tests)
        for t in tests:
            self.w(f"- {t['what']}; p = {pfmt(t['p'])} (Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])})")
        self.w()
        if tests and not self.verdict(names, ""):
            sig = [t for t in tests if t["holm"] < ALPHA]
            self.w(f"Rule: modes *differ* where a test is significant after Holm: {len(sig)} of {len(tests)} are"
                   + (" (" + "; ".join(t["what"].split(";")[0] for t in sig) + ")" if sig else "")
                   + f". Verdict: **{'differ' if sig else 'no difference shown'}**.")
        else:
            self.w("Verdict: " + self.verdict(names, "") + ".")
        self.w()

    def early_late(self):
        self.w("### 4. Early vs late injection")
        self.w()
        self.w(f"Estimand: on the same sites, the harmful (and incorrect) rate of a flip in the checkpoint after epoch {G.POINT_EPOCH['early']} "
               f"(step 200) against the one after epoch {G.POINT_EPOCH['late']} (step 400); exact McNemar on the discordant pairs.")
        self.w()
        tests, names = [], []
        for role in ("model", "master", "optimizer"):
            e, l = f"dp-{role}-early", f"dp-{role}-late"
            names += [e, l]
            if e in self.outcomes and l in self.outcomes:
                tests += [self.mcnemar(f"{role}, {what}", e, l, f, "early", "late") for what, f in PAIRED_OUTCOMES]
        self.family(tests)
        for t in tests:
            self.w(f"- {t['what']}; McNemar p = {pfmt(t['p'])} (Holm {pfmt(t['holm'])}, BH q {pfmt(t['bh'])})")
        self.w()
        if tests and not self.verdict(names, ""):
            sig = [t for t in tests if t["holm"] < ALPHA]
            self.w(f"Verdict: **{'differ' if sig else 'no difference shown'}** ({len(sig)} of {len(tests)} paired tests significant after Holm).")
        else:
            self.w("Verdict: " + self.verdict(names, "") + ".")
        self.w()

    def kflips(self):
        self.w("### 5. 1, 10, 100 flips")
        self.w()
        rows = []
        for k in (1, 10, 100):
            for nomsb in (False, True):
                name = ("dp-model-late" if k == 1 else f"dp-model-late-k{k}") + ("-nomsb" if nomsb and k != 1 else "")
                if k == 1 and nomsb:
                    name = "dp-model-late-k1-nomsb"
                if name in self.outcomes:
                    c = self.counts(name)
                    rows.append(f"| {k} | {'sparing bit 14' if nomsb else 'anywhere'} | `{name}` | {rate(c['harmful'], c['n'])} | {rate(c['incorrect'], c['n'])} |")
        if rows:
            self.w("| flips | bits | campaign | harmful | incorrect |")
            self.w("|---:|---|---|---|---|")
            for r in rows:
                self.w(r)
        else:
            self.w("No K-flip arm has records yet.")
        self.w()

    def tensors(self):
        self.w("### 6. Which tensors are most vulnerable")
        self.w()
        found = False
        for role in ("model", "master"):
            name = f"dp-{role}-late-tensors"
            if name not in self.outcomes:
                continue
            found = True
            per, groups = pvf_table([(r, o) for r, o, _ in self.outcomes[name]], self.data[name].get("space"))
            ranked = sorted(((g, e["pvf"]["point"]) for g, e in groups.items() if e.get("pvf")), key=lambda x: -x[1])
            hit = sorted(((t, e) for t, e in per.items() if e["n"] and e["incorrect"]), key=lambda x: (-x[1]["incorrect"] / x[1]["n"], x[0]))
            status = "" if self.complete(name) else " (partial: pending)"
            ns = sorted({e["n"] for e in per.values() if e["n"]})
            self.w(f"- {role}{status}: groups by PVF " + ", ".join(f"{g} {100 * p:.1f}%" for g, p in ranked)
                   + ("; tensors with an incorrect output: " + ", ".join(f"`{t}` {rate(e['incorrect'], e['n'])}" for t, e in hit)
                      if hit else "; no tensor had an incorrect output")
                   + f" (n = {ns[0] if len(ns) == 1 else f'{ns[0]}-{ns[-1]}'} per tensor: a ranking of tensors is as wide as "
                   "these intervals).")
        if not found:
            self.w("Pending: no per-tensor arm has records yet.")
        self.w()

    def failure_modes(self):
        self.w("### 7. The four failure modes of LLM-training fault studies")
        self.w()
        self.w("Recent fault studies of LLM training describe four courses of the loss after a fault: a spike that recovers, a spike "
               "that leaves the run degraded, a silent degradation (the loss looks normal, the model is worse) and a gradual drift. "
               "Here they are the loss-curve classes (design: a window's loss above its band; first excursion within two windows of "
               "the fault = spike; last window still above = degrade or drift; never above but an SDC = silent), counted per uniform "
               "campaign (the per-bit, per-tensor and some-bits arms left out: their shares would estimate nothing). Two bands: the "
               "noise runs' (ulp and data order pooled: what a loss curve varies by from one valid run to another, so an excursion "
               "past it is one a person watching the curve could see), and the ulp runs' alone (the fault trials' own data order: an "
               "excursion past it is any mark the fault left on the curve beyond numerical chaos, however small).")
        self.w()
        rows, cross, inside = [], {}, [0, 0, 0, 0]  # within the pooled band / trials with a curve, the same against the ulp band
        for a in self.fault_arms():
            if not uniform(a):
                continue
            recs = self.outcomes[a.name]
            narrow = self.ulp_curve_classes(a) or []
            cnt = {k: sum(1 for _, _, cc in recs if cc == k) for k in CURVES}
            ncnt = {k: sum(1 for cc in narrow if cc == k) for k in CURVES}
            n = sum(cnt.values())
            if not n:
                continue
            nn = sum(ncnt.values())
            inside[0] += cnt["within_band"]
            inside[1] += n
            inside[2] += ncnt["within_band"]
            inside[3] += nn
            rows.append(f"| {a.name}{'' if self.complete(a.name) else ' (running)'} | {n} | "
                        + " | ".join(f"{cnt[k]} ({pct(cnt[k], n)})" for k in CURVES) + " | "
                        + (" | ".join(f"{ncnt[k]}" for k in CURVES) if nn else " | ".join("-" for _ in CURVES)) + " |")
            for _, o, cc in recs:
                if cc in ("spike_recover", "spike_degrade", "gradual_drift"):
                    e = cross.setdefault(cc, [0, 0, 0])
                    e[0] += 1
                    e[1] += o in R.OUTSIDE
                    e[2] += o == "critical"
        if not rows:
            self.w("Pending: no uniform campaign has loss curves yet.")
            self.w()
            return
        heads = [k.replace("_", " ") for k in CURVES]
        self.w("| campaign | trials with a curve | " + " | ".join(heads) + " | against the ulp band: " + " | ".join(heads) + " |")
        self.w("|---|---:|" + "---:|" * (2 * len(CURVES)))
        for r in rows:
            self.w(r)
        self.w()
        self.w("A class names the course of the training loss against the pooled band, not where the model ended: of these trials, "
               "the final test bpb left the noise band (SDC) in " + "; ".join(
                   f"{cross[k][1]} of {cross[k][0]} {k.replace('_', ' ')} ({cross[k][2]} critical)" for k in CURVES if k in cross)
               + ". A spike that *recovers* is a loss that came back inside its band, which a model outside the noise band can "
               f"still do. Over these campaigns, {inside[0]} of {inside[1]} curves ({pct(inside[0], inside[1])}) stay within the pooled "
               f"band and {inside[2]} of {inside[3]} ({pct(inside[2], inside[3])}) within the ulp band: the difference is the flips "
               "that mark the curve beyond numerical chaos but by less than another data order moves it.")
        self.w()

    def seeds(self):
        self.w("### 8. Training seeds")
        self.w()
        self.seed_lines([(f"dp late {role}", [(seed, f"dp-{role}-late" + ("" if seed == 1 else f"-s{seed}")) for seed in G.SEEDS])
                         for role in ("model", "master", "optimizer")])

    def against_mlp(self):
        self.w("### 9. Against the MLP/CNN study")
        self.w()
        if not self.mlp:
            self.w("The MLP/CNN study's records (`docs/results/dp-vs-mp-study/`) are not there to compare with.")
            self.w()
            return
        rep = self.mlp
        parts = []
        for model in ("mlp", "cnn"):
            for role in ("model", "optimizer"):
                name = f"{model}-dp-{role}-late"
                if name in rep.outcomes:
                    c = rep.counts(name)
                    parts.append(f"{model} {role} {rate(c['harmful'], c['n'])}{'' if rep.complete(name) else ' (partial)'}")
            b30 = f"{model}-dp-model-late-bit30"
            if b30 in rep.outcomes:
                c = rep.counts(b30)
                parts.append(f"{model} bit 30 {rate(c['harmful'], c['n'])}{'' if rep.complete(b30) else ' (partial)'}")
        here = []
        for name in ("dp-model-late", "dp-master-late", "dp-optimizer-late", "dp-model-late-bit14", "dp-master-late-bit30"):
            if name in self.outcomes:
                c = self.counts(name)
                here.append(f"{name} {rate(c['harmful'], c['n'])}{'' if self.complete(name) else ' (partial)'}")
        self.w("Harmful rates, dp, late checkpoint, of one uniform flip, and (enriched) of a flip of the exponent MSB (bit 30 of an "
               "fp32 word, bit 14 of a bf16 one) (the MLP/CNN study: Fashion-MNIST, fp32 Adam, accuracy on 2,000 images; here: bf16 "
               "AdamW, bits per byte):")
        self.w()
        self.w("- MLP/CNN: " + ("; ".join(parts) if parts else "no records yet") + ".")
        self.w("- transformer: " + ("; ".join(here) if here else "no records yet") + ".")
        mb = rep.bands.pooled("mlp", "late")
        tb = self.bands.pooled("late")
        if mb and tb:
            self.w(f"- The late noise bands: MLP [{min(mb)}, {max(mb)}] test images of {rep.test_limit} (n = {len(mb)}"
                   f"{'' if all(rep.complete(n) for n in ('noise-ulp-mlp-dp-late', 'noise-order-mlp-dp-late')) else ', partial'}); "
                   f"transformer [{min(tb):+.5f}, {max(tb):+.5f}] bits per byte (n = {len(tb)}, {100 * max(abs(min(tb)), max(tb)) / self.golden_bpb():.2f} % "
                   "of the golden's loss at most).")
        self.w()
        self.w("Where the two differ in kind: a bf16 weight is rewritten from its fp32 master by the next step, so a flip of a `model` "
               "word acts for one step only, while in the fp32 MLP/CNN the weight is the optimizer's state and a flip persists; the "
               "transformer's persistent model state is its masters. bf16 keeps fp32's 8-bit exponent, so setting its MSB (bit 14) "
               "multiplies a normal |w| below 1 by 2^128 exactly as bit 30 does in fp32. Clipping at a global norm of 1 (the gpt's recipe; the MLP/CNN "
               "have none) scales every gradient of a step by one factor, so one huge gradient also shrinks every other weight's step.")
        self.w()

    def golden_bpb(self):
        d = self.data.get("noise-order-dp-late") or next(iter(self.data.values()))
        return d["golden"].get("test_bpb") or 1.0

    def render(self, plot_dir, no_plots):
        self.plot_dir, self.no_plots = plot_dir, no_plots
        self.header()
        self.budget()
        self.goldens()
        self.noise()
        self.campaigns()
        self.plot_outcomes()
        self.per_bit()
        self.pvf()
        self.findings()
        return "\n".join(self.out) + "\n"


def main(args):
    publish = os.path.abspath(args.publish)
    plan_name, gold, data, rates = load(publish, os.path.abspath(args.live) if args.live else None)
    mlp = None
    mlp_pub = os.path.join(ROOT, "docs", "results", "dp-vs-mp-study")
    if os.path.isdir(mlp_pub) and plan_name == "full":
        mp, mg, md = R.load(mlp_pub, None)
        mlp = R.Report(mp, mg, md)
    from dp_vs_mp import die, write_or_die  # noqa: E402
    out = os.path.abspath(args.out)
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)  # the plots go beside it
    except OSError as e:
        die(f"--out: cannot create {os.path.dirname(out)}: {e.strerror}", 3)
    rep = Report(plan_name, gold, data, rates, mlp)
    text = rep.render(os.path.dirname(out), getattr(args, "no_plots", False))
    write_or_die(out, text)
    print(f"report: {out} ({len(data)} arms with records, {len(rep.plots)} plots)")
