#!/usr/bin/python3
"""scripts/study/stats.py against scipy (where it has the function) and exact enumeration (where not)."""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts", "study"))
import stats as S  # noqa: E402
from scipy import stats as ss  # noqa: E402

fails = []


def close(a, b, tol, what):
    if not (abs(a - b) <= tol or (math.isinf(a) and math.isinf(b))):
        fails.append(f"{what}: {a!r} != {b!r} (tol {tol})")


# Clopper-Pearson against scipy's beta quantiles, including 0 and n events
for x, n in [(0, 10), (0, 300), (1, 300), (8, 300), (150, 300), (300, 300), (22, 52), (5, 7), (0, 1), (1, 1)]:
    lo, hi = S.clopper_pearson(x, n)
    elo = 0.0 if x == 0 else ss.beta.ppf(0.025, x, n - x + 1)
    ehi = 1.0 if x == n else ss.beta.ppf(0.975, x + 1, n - x)
    close(lo, elo, 1e-9, f"CP lo {x}/{n}")
    close(hi, ehi, 1e-9, f"CP hi {x}/{n}")
    r = ss.binomtest(x, n).proportion_ci(method="exact")
    close(lo, r.low, 1e-9, f"CP lo vs binomtest {x}/{n}")
    close(hi, r.high, 1e-9, f"CP hi vs binomtest {x}/{n}")
    jl, jh = S.jeffreys(x, n)
    close(jl, 0.0 if x == 0 else ss.beta.ppf(0.025, x + 0.5, n - x + 0.5), 1e-9, f"Jeffreys lo {x}/{n}")
    close(jh, 1.0 if x == n else ss.beta.ppf(0.975, x + 0.5, n - x + 0.5), 1e-9, f"Jeffreys hi {x}/{n}")
    wl, wh = S.wilson(x, n)
    r = ss.binomtest(x, n).proportion_ci(method="wilson")
    close(wl, r.low, 1e-9, f"Wilson lo {x}/{n}")
    close(wh, r.high, 1e-9, f"Wilson hi {x}/{n}")

# incomplete beta against scipy
for a, b, x in [(0.5, 300.5, 0.001), (22.5, 30.5, 0.4), (99, 2, 0.95), (1, 1, 0.3), (150.5, 150.5, 0.5)]:
    close(S.beta_cdf(x, a, b), ss.beta.cdf(x, a, b), 1e-10, f"beta_cdf({x}, {a}, {b})")

# Fisher exact test against scipy
rng = random.Random(3)
for _ in range(60):
    a, b, c, d = (rng.randint(0, 40) for _ in range(4))
    close(S.fisher_exact(a, b, c, d), ss.fisher_exact([[a, b], [c, d]])[1], 1e-9, f"fisher {a, b, c, d}")
close(S.fisher_exact(22, 0, 0, 30), ss.fisher_exact([[22, 0], [0, 30]])[1], 1e-12, "fisher 22/22 vs 0/30")

# exact McNemar = two-sided binomial test of the discordant pairs
for a, b in [(0, 0), (69, 19), (5, 5), (0, 7), (37, 11), (1, 0)]:
    want = 1.0 if a + b == 0 else ss.binomtest(a, a + b, 0.5).pvalue
    close(S.mcnemar_exact(a, b), want, 1e-10, f"mcnemar {a}, {b}")

# CMH: against the definition evaluated by scipy's chi2, and the MH odds ratio against enumeration of its formula
tables = [((10, 90), (3, 97)), ((0, 100), (0, 100)), ((5, 20), (1, 24)), ((7, 3), (6, 4))]
r = S.cmh(tables, correction=False)
num = sum(a - (a + b) * (a + c) / (a + b + c + d) for (a, b), (c, d) in tables)
var = sum((a + b) * (c + d) * (a + c) * (b + d) / ((a + b + c + d) ** 2 * (a + b + c + d - 1)) for (a, b), (c, d) in tables)
close(r["chi2"], num * num / var, 1e-12, "CMH statistic")
close(r["p"], ss.chi2.sf(num * num / var, 1), 1e-12, "CMH p")
orr = sum(a * d / (a + b + c + d) for (a, b), (c, d) in tables) / sum(b * c / (a + b + c + d) for (a, b), (c, d) in tables)
close(r["or"], orr, 1e-12, "MH odds ratio")
# a single stratum: CMH (uncorrected) equals the Pearson chi-square times (n-1)/n
(a, b), (c, d) = (12, 8), (5, 15)
chi_p = ss.chi2_contingency([[a, b], [c, d]], correction=False)[0]
n = a + b + c + d
close(S.cmh([((a, b), (c, d))], correction=False)["chi2"], chi_p * (n - 1) / n, 1e-12, "CMH one stratum")

# Holm and BH against exact enumeration of their definitions
ps = [0.01, 0.04, 0.03, 0.005, 0.5, 0.2]
m = len(ps)
order = sorted(range(m), key=lambda i: ps[i])
for i in range(m):
    k = order.index(i)
    want = min(1.0, max(min(1.0, (m - j) * ps[order[j]]) for j in range(k + 1)))
    close(S.holm(ps)[i], want, 1e-15, f"Holm {i}")
    want_bh = min(min(1.0, ps[order[j]] * m / (j + 1)) for j in range(k, m))
    close(S.benjamini_hochberg(ps)[i], want_bh, 1e-15, f"BH {i}")
try:
    from scipy.stats import false_discovery_control  # scipy >= 1.11
    for i, q in enumerate(false_discovery_control(ps)):
        close(S.benjamini_hochberg(ps)[i], q, 1e-12, f"BH vs scipy {i}")
except ImportError:
    pass

# the stratified rate: a zero-event stratum still widens the interval, and the point lies inside
z = S.stratified_rate({"sign": (0, 100), "exponent": (8, 100), "mantissa": (0, 100)}, {"sign": 1, "exponent": 8, "mantissa": 23})
if not (z["lo"] <= z["point"] <= z["hi"]):
    fails.append(f"stratified point outside its interval: {z}")
none = S.stratified_rate({"sign": (0, 10), "exponent": (0, 80), "mantissa": (0, 230)}, {"sign": 1, "exponent": 8, "mantissa": 23})
if not (none["point"] == 0.0 and none["lo"] == 0.0 and none["hi"] > 0.0 and none["widened"]):
    fails.append(f"no events in any stratum: the point is 0 and the interval must reach it: {none}")
only = S.stratified_rate({"exponent": (8, 100)}, {"exponent": 1})
zero = S.stratified_rate({"a": (0, 100)}, {"a": 1})
if not zero["hi"] > 0.0:
    fails.append("a zero-event stratum gave a zero-width interval")
close(zero["hi"], ss.beta.ppf(0.975, 0.5, 100.5), 2e-3, "stratified zero-event upper bound = Jeffreys quantile")
close(only["lo"], ss.beta.ppf(0.025, 8.5, 92.5), 3e-3, "stratified one stratum = Jeffreys interval (lo)")

# posterior P(p1 > p2) against numerical integration with scipy
x1, n1, x2, n2 = 8, 300, 2, 300
grid = [i / 20000 for i in range(1, 20000)]
num = sum(ss.beta.pdf(t, x1 + .5, n1 - x1 + .5) * ss.beta.cdf(t, x2 + .5, n2 - x2 + .5) for t in grid) / 20000
close(S.posterior_prob_greater(x1, n1, x2, n2), num, 0.01, "posterior P(p1 > p2)")

# Newcombe's interval contains the observed difference and matches the textbook example (Newcombe 1998, 56/70 vs 48/80)
lo, hi = S.newcombe_diff(56, 70, 48, 80)
close(lo, 0.0524, 5e-4, "Newcombe lo")
close(hi, 0.3339, 5e-4, "Newcombe hi")

# Paired proportions (two campaigns drawing their sites from one stream): Newcombe's paired interval covers the
# true difference about 95 % of the time under strongly correlated pairs (a wrong sign of phi makes it ~0.90),
# and with no concordant events it is the unpaired interval of the same n
rng = random.Random(11)
cells = (0.2, 0.08, 0.03, 0.69)  # both, only 1, only 2, neither
true_d = cells[1] - cells[2]
cover, reps = 0, 3000
for _ in range(reps):
    c = [0, 0, 0, 0]
    for _ in range(120):
        u, k = rng.random(), 0
        while u > cells[k] and k < 3:
            u -= cells[k]
            k += 1
        c[k] += 1
    lo, hi = S.newcombe_paired_diff(*c)
    cover += lo <= true_d <= hi
if not 0.935 <= cover / reps <= 0.975:
    fails.append(f"Newcombe paired interval covers {cover / reps:.3f} of 3000 draws, not about 0.95")
lo, hi = S.newcombe_paired_diff(10, 30, 20, 40)
if not lo < (40 - 30) / 100 < hi:
    fails.append("Newcombe paired interval does not contain the observed difference")
# the posterior of the paired difference against numpy's Dirichlet draws
import numpy as np  # noqa: E402
for b, c in ((7, 2), (0, 0), (0, 5), (30, 31)):
    d = np.random.default_rng(3).dirichlet([4.5, b + 0.5, c + 0.5, 50.5], size=400000)
    close(S.posterior_prob_greater_paired(b, c), float(np.mean(d[:, 1] > d[:, 2])), 4e-3, f"paired posterior P(p1 > p2), {b} vs {c} discordant")

# trials_for_width: the smallest n that reaches the width
n = S.trials_for_width(0.25, 0.10)
if not (S.cp_width(round(0.25 * n), n) <= 0.10 < S.cp_width(round(0.25 * (n - 1)), n - 1)):
    fails.append(f"trials_for_width(0.25, 0.10) = {n} is not the first n that reaches the width")

# tolerance interval confidence against enumeration of order statistics (Monte Carlo with uniforms)
rng = random.Random(5)
hits = sum((lambda xs: max(xs) - min(xs) >= 0.95)([rng.random() for _ in range(100)]) for _ in range(20000))
close(S.tolerance_confidence(100), hits / 20000, 0.01, "[min, max] tolerance confidence, n = 100")
# and exactly (1 - I_0.95(n - 1, 2), scipy) down to the fewest draws a running study's noise band has: 2, 1, 0
for n in (2, 3, 10):
    close(S.tolerance_confidence(n), ss.beta.sf(0.95, n - 1, 2), 1e-12, f"[min, max] tolerance confidence, n = {n}")
for n in (1, 0):
    close(S.tolerance_confidence(n), 0.0, 0.0, f"[min, max] tolerance confidence, n = {n}")

# The reports' paired test: trials pair by trial id (a trial only one campaign has is left out), the
# discordant counts go to the exact McNemar test, and the line names both rates and both discordant counts.
import report as R  # noqa: E402
rb = R.ReportBase()
rb.outcomes = {"a": [({"trial": t}, o, None) for t, o in enumerate(["due", "masked", "due", "critical", "masked", "due"])],
               "b": [({"trial": t}, o, None) for t, o in enumerate(["due", "due", "masked", "masked", "masked"])]}
t = rb.mcnemar("x", "a", "b", lambda o: o in R.HARMFUL, "one replica", "all", "one")
# pairs 0-4: harmful a = 1,0,1,1,0 (3 of 5), b = 1,1,0,0,0 (2 of 5); only a: trials 2, 3; only b: trial 1
want = f"x: one replica {R.rate(3, 5)} vs all {R.rate(2, 5)}; 2 only one, 1 only all"
if t["what"] != want:
    fails.append(f"paired test line {t['what']!r}, want {want!r}")
close(t["p"], ss.binomtest(1, 3, 0.5).pvalue, 1e-12, "paired test p = exact McNemar on 2 vs 1 discordant")

# The one-replica line: replicas apart at the end (the fault persisted), and of those, which the logged loss
# or rank 0's result showed; trials without a divergence measurement (a stop) count only as stops.
def div(k):
    return {"summary": {"replica_divergence": {"elements": 100, "elements_differing": k, "ranks_differing": int(k > 0)}}}
rb.outcomes = {"one": [(div(1), "noise_changed", "within_band"), (div(1), "critical", "spike_degrade"), (div(3), "sdc", "silent_degradation"),
                       (div(0), "bitwise_masked", "within_band"), (div(2), "noise_changed", "spike_recover"), ({"summary": None}, "due", "diverged")],
               "all": [(div(0), "noise_changed", "within_band"), (div(0), "critical", "spike_degrade")]}
line = rb.replica_line("one", "L", "all")
want = ("- L: replicas still apart at the end in 4 of 5 trials (median 1, at most 3 of 100 weights differ from rank 0's); the all-replica arm: "
        "0 of 2. Of the 4 apart, the logged training loss left its band in 2 and rank 0's result left the noise band in 2; 1 ended apart with "
        "neither showing it. Stopped on a non-finite value: 1 of 6.")
if line != want:
    fails.append(f"replica line {line!r}, want {want!r}")

if fails:
    print("\n".join(fails))
    sys.exit(1)
print("study stats: all checks hold")
