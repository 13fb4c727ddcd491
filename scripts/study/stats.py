"""Statistics of the dp-vs-mp study (docs/design/study-method.md), in the standard library only.

Exact binomial intervals and tests, Jeffreys posteriors, stratified rates whose intervals stay honest
when a stratum has no events, the Cochran-Mantel-Haenszel test across strata, and Holm / Benjamini-
Hochberg adjustment. tests/study_stats_test.py checks every function against scipy or exact enumeration.
"""
import math
import random

# ---------------------------------------------------------------- binomial basics


def _log_binom_pmf(k, n, p):
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


def binom_pmf(k, n, p):
    return math.exp(_log_binom_pmf(k, n, p))


def binom_cdf(k, n, p):
    """P(X <= k), X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, math.fsum(binom_pmf(i, n, p) for i in range(k + 1)))


def binom_sf(k, n, p):
    """P(X >= k)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return min(1.0, math.fsum(binom_pmf(i, n, p) for i in range(k, n + 1)))


def _solve(f, target, lo=0.0, hi=1.0, increasing=True, iters=100):
    for _ in range(iters):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(x, n, conf=0.95):
    """Exact (Clopper-Pearson) interval of a binomial proportion; (0, 1) for n == 0."""
    if n == 0:
        return (0.0, 1.0)
    a = (1 - conf) / 2
    lo = 0.0 if x == 0 else _solve(lambda p: binom_sf(x, n, p), a, increasing=True)
    hi = 1.0 if x == n else _solve(lambda p: binom_cdf(x, n, p), a, increasing=False)
    return (lo, hi)


def cp_width(x, n, conf=0.95):
    lo, hi = clopper_pearson(x, n, conf)
    return hi - lo


def trials_for_width(p, target, conf=0.95, n_max=100000):
    """Smallest n whose Clopper-Pearson interval at x = round(p n) is at most `target` wide."""
    lo, hi = 1, n_max
    while lo < hi:
        mid = (lo + hi) // 2
        if cp_width(round(p * mid), mid, conf) <= target:
            hi = mid
        else:
            lo = mid + 1
    # the width is not monotone in n at every step (rounding of x): walk up to the first n that holds
    n = lo
    while cp_width(round(p * n), n, conf) > target:
        n += 1
    return n


def wilson(x, n, conf=0.95):
    if n == 0:
        return (0.0, 1.0)
    z = normal_ppf(1 - (1 - conf) / 2)
    ph = x / n
    d = 1 + z * z / n
    c = (ph + z * z / (2 * n)) / d
    h = z * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


# ---------------------------------------------------------------- normal and beta

def normal_cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2))


def normal_ppf(q):
    return _solve(normal_cdf, q, -40.0, 40.0, increasing=True, iters=200)


def _betacf(a, b, x):
    # continued fraction of the incomplete beta (Numerical Recipes' Lentz form)
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def beta_cdf(x, a, b):
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def beta_ppf(q, a, b):
    return _solve(lambda x: beta_cdf(x, a, b), q, increasing=True, iters=100)


def jeffreys(x, n, conf=0.95):
    """Equal-tailed Jeffreys interval: the Beta(x + 1/2, n - x + 1/2) posterior's quantiles."""
    a = (1 - conf) / 2
    lo = 0.0 if x == 0 else beta_ppf(a, x + 0.5, n - x + 0.5)
    hi = 1.0 if x == n else beta_ppf(1 - a, x + 0.5, n - x + 0.5)
    return (lo, hi)


# ---------------------------------------------------------------- stratified rates

def stratified_rate(strata, weights, conf=0.95, draws=40000, seed=1):
    """Rate of a mixture of strata, sum_s w_s p_s, from per-stratum counts {s: (x, n)}.

    Point: sum w_s x_s / n_s (the plug-in estimate). Interval: quantiles of sum w_s P_s with
    P_s ~ Beta(x_s + 1/2, n_s - x_s + 1/2) (Jeffreys posteriors, independent): a stratum with no events still
    contributes its posterior spread, where the Wald variance p(1-p)/n of a zero-event stratum is zero. Where
    the point lies outside the equal-tailed quantiles (no events in any stratum: the point is 0 and every
    draw above it) the interval is widened to reach it, as the single-rate Jeffreys interval's lower bound is 0
    at x = 0 (`widened` says so)."""
    wsum = sum(weights[s] for s in strata)
    point = sum(weights[s] * strata[s][0] / strata[s][1] for s in strata if strata[s][1]) / wsum
    rng = random.Random(seed)
    vals = []
    for _ in range(draws):
        v = 0.0
        for s, (x, n) in strata.items():
            v += weights[s] * rng.betavariate(x + 0.5, n - x + 0.5)
        vals.append(v / wsum)
    vals.sort()
    a = (1 - conf) / 2
    lo, hi = vals[int(a * (draws - 1))], vals[int((1 - a) * (draws - 1))]
    widened = not (lo <= point <= hi)
    return {"point": point, "lo": min(lo, point), "hi": max(hi, point), "widened": widened}


# ---------------------------------------------------------------- tests

def fisher_exact(a, b, c, d):
    """Two-sided Fisher exact test of [[a, b], [c, d]] (sum of the tables no more likely than the observed)."""
    r1, r2, c1 = a + b, c + d, a + c
    n = r1 + r2

    def logp(k):
        return (math.lgamma(r1 + 1) - math.lgamma(k + 1) - math.lgamma(r1 - k + 1)
                + math.lgamma(r2 + 1) - math.lgamma(c1 - k + 1) - math.lgamma(r2 - c1 + k + 1)
                - (math.lgamma(n + 1) - math.lgamma(c1 + 1) - math.lgamma(n - c1 + 1)))
    lo, hi = max(0, c1 - r2), min(r1, c1)
    obs = logp(a)
    p = math.fsum(math.exp(logp(k)) for k in range(lo, hi + 1) if logp(k) <= obs + 1e-7)
    return min(1.0, p)


def mcnemar_exact(only_a, only_b):
    """Exact two-sided McNemar test: the discordant pairs against Binomial(m, 1/2)."""
    m = only_a + only_b
    if m == 0:
        return 1.0
    k = min(only_a, only_b)
    return min(1.0, 2 * binom_cdf(k, m, 0.5))


def newcombe_diff(x1, n1, x2, n2, conf=0.95):
    """Newcombe's hybrid score interval (method 10) of p1 - p2 for independent samples."""
    l1, u1 = wilson(x1, n1, conf)
    l2, u2 = wilson(x2, n2, conf)
    p1, p2 = x1 / n1, x2 / n2
    d = p1 - p2
    return (d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def newcombe_paired_diff(both, only_1, only_2, neither, conf=0.95):
    """Newcombe's score interval (method 10, with the continuity-corrected phi) of p1 - p2 for paired
    proportions: `both` pairs with the event in both members, `only_1` / `only_2` in one, `neither` in none."""
    n = both + only_1 + only_2 + neither
    x1, x2 = both + only_1, both + only_2
    l1, u1 = wilson(x1, n, conf)
    l2, u2 = wilson(x2, n, conf)
    p1, p2 = x1 / n, x2 / n
    den = (both + only_1) * (only_2 + neither) * (both + only_2) * (only_1 + neither)
    phi = 0.0
    if den > 0:
        cross = both * neither - only_1 * only_2
        phi = (max(cross - n / 2, 0.0) if cross > 0 else cross) / math.sqrt(den)
    d = p1 - p2
    lo = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    hi = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return (max(-1.0, d - math.sqrt(max(lo, 0.0))), min(1.0, d + math.sqrt(max(hi, 0.0))))


def posterior_prob_greater_paired(only_1, only_2):
    """P(p1 > p2 | data) for paired proportions under a Jeffreys Dirichlet(1/2, 1/2, 1/2, 1/2) posterior of the
    four cells: p1 - p2 is the difference of the two discordant cells, and P(theta_10 > theta_01) is
    P(B > 1/2) for B ~ Beta(only_1 + 1/2, only_2 + 1/2) (exact, no sampling)."""
    return 1.0 - beta_cdf(0.5, only_1 + 0.5, only_2 + 0.5)


def posterior_prob_greater(x1, n1, x2, n2, draws=40000, seed=1):
    """P(p1 > p2 | data) under independent Jeffreys posteriors (Monte Carlo)."""
    rng = random.Random(seed)
    hit = 0
    for _ in range(draws):
        hit += rng.betavariate(x1 + 0.5, n1 - x1 + 0.5) > rng.betavariate(x2 + 0.5, n2 - x2 + 0.5)
    return hit / draws


def cmh(tables, correction=True):
    """Cochran-Mantel-Haenszel test of 2x2 tables [[a, b], [c, d]] (a: group 1 events, b: group 1
    non-events, c, d: group 2), one per stratum. Returns the chi-square statistic (1 df), its p-value and
    the Mantel-Haenszel common odds ratio. Strata with fewer than two trials carry no information and
    are skipped."""
    num, var, r_num, r_den = 0.0, 0.0, 0.0, 0.0
    for (a, b), (c, d) in tables:
        n = a + b + c + d
        if n < 2:
            continue
        r1, r2, c1, c2 = a + b, c + d, a + c, b + d
        num += a - r1 * c1 / n
        var += r1 * r2 * c1 * c2 / (n * n * (n - 1))
        r_num += a * d / n
        r_den += b * c / n
    if var == 0:
        return {"chi2": 0.0, "p": 1.0, "or": math.nan}
    stat = (abs(num) - (0.5 if correction else 0.0)) ** 2 / var
    if correction and abs(num) < 0.5:
        stat = 0.0
    p = math.erfc(math.sqrt(stat / 2))  # chi-square(1) survival function
    odds = r_num / r_den if r_den > 0 else math.inf
    return {"chi2": stat, "p": p, "or": odds}


def holm(pvalues):
    """Holm step-down adjusted p-values, in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj = [0.0] * m
    run = 0.0
    for rank, i in enumerate(order):
        run = max(run, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = run
    return adj


def benjamini_hochberg(pvalues):
    """Benjamini-Hochberg adjusted p-values (q-values), in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i], reverse=True)
    adj = [0.0] * m
    run = 1.0
    for k, i in enumerate(order):
        rank = m - k
        run = min(run, pvalues[i] * m / rank)
        adj[i] = min(1.0, run)
    return adj


def tolerance_confidence(n, content=0.95):
    """Confidence that [min, max] of n draws covers at least `content` of a continuous distribution."""
    # coverage of [X(1), X(n)] is Beta(n - 1, 2): P(C >= content) = 1 - I_content(n - 1, 2); one draw (or none)
    # spans no interval, which covers nothing of a continuous distribution
    if n < 2:
        return 0.0
    return 1.0 - beta_cdf(content, n - 1, 2)
