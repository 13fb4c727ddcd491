#!/usr/bin/python3
"""The transformer fault-injection study: ckpt-train's gpt in bf16 with AdamW (method: docs/design/study-method.md).

  transformer.py plan   [--plan full|smoke] [--publish DIR]       arms, trial counts, widths, the CPU budget
  transformer.py rate   [--plan full|smoke] [--dir D] [--trials 3] [--commit]
                                                                  measure the per-trial rate of each mode and point
  transformer.py run    [--plan full|smoke] [--dir D] [--only ARM ...] [--jobs 1] [--publish DIR] [--commit]
  transformer.py publish [--dir D] [--publish DIR]                records of finished arms -> DIR/*.jsonl.gz, the
                                                                  trials of unfinished ones -> DIR/partial/*.tar.gz
  transformer.py report [--publish DIR] [--live D] [--out docs/results/transformer.md]

The machinery is the dp-vs-mp study's (scripts/study/dp_vs_mp.py: golden runs, resumable campaigns in
D/campaigns/NAME, each finished arm's records slimmed and gzipped to DIR/NAME.jsonl.gz and with --commit
committed); the arms are scripts/study/gpt_plan.py's: noise, the uniform-bit rate of the bf16 weights, fp32
masters and AdamW moments, per-bit and per-tensor strata, the exponent MSB, dp vs pp vs tp and one replica,
early vs late, 1/10/100 flips. Golden runs: seeds 1-3 (dp), seed 1 (pp, tp), 6 epochs of 100 steps, 2 ranks.

An arm whose records DIR already holds at its planned size is not run again (golden runs and trials are
deterministic: another directory gives the same records), so a study can continue from a checkout's published
records in a fresh --dir, after checking that its golden runs give the published numbers exactly; an arm
`publish` left unfinished in DIR/partial continues from its kept trials there. `rate` runs a 3-trial campaign per (mode, point) in D/campaigns/rate-MODE-POINT and writes DIR/rates.json (CPU and wall seconds per
trial); `plan` and `run` print the study's budget from it first. Trials are classified on the validation
loss in bits per byte (`test_bpb`, lower is better). Locking, signals and exit codes are dp_vs_mp.py's.

Examples:
  scripts/study/transformer.py plan
  scripts/study/transformer.py rate --commit
  nice -n 19 scripts/study/transformer.py run --jobs 1 --commit        # the full study, resumable
  scripts/study/transformer.py run --plan smoke --dir out/tf-smoke --publish out/tf-smoke/pub
  scripts/study/transformer.py report
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import dp_vs_mp as D  # noqa: E402
import gpt_plan as G  # noqa: E402
import stats as S  # noqa: E402

DEFAULT_DIR = os.path.join(ROOT, "out", "transformer-study")
DEFAULT_PUBLISH = os.path.join(ROOT, "docs", "results", "transformer-study")
N_MAX = 2000
RATE_KEYS = [("dp", "late"), ("dp", "early"), ("pp", "late"), ("tp", "late")]


def die(msg, code=2):
    print(f"transformer.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


class GptStudy(D.Study):
    P = G
    title = "transformer study"
    study = "transformer"
    metric = G.METRIC
    higher_is_better = False
    tolerance = G.CRITICAL_BPB
    full_eval_limit = 4104   # all validation windows of 64 bytes (262,676 bytes); 0 would mean the stored limit
    summary_keys = ("test_bpb", "test_loss", "final_loss", "loss_curve", "nan_detected", "steps")
    # Trials resume 2 or 4 epochs and are read only at the end: evaluating and saving the epochs between
    # cost 8-11 % of a trial (docs/results/2026-11-28-final-only-trials.md), and the end is the same bits.
    # Their two ranks share the cores with the other study's trials, so a waiting rank sleeps rather than
    # yields: 0.90 of the CPU time, the same bits (docs/results/2026-11-28-gpt-trial-mpi-wait.md).
    resume_options = ("--final-only", "--mpi-wait", "backoff")

    def recipe(self, g):
        return G.recipe(self.plan, g[1])

    def loss_every(self, model):
        return G.LOSS_EVERY[model] if self.plan == "full" else G.SMOKE_LOSS_EVERY

    def test_limit(self):
        return G.TEST_LIMIT if self.plan == "full" else 64

    def point_epoch(self, point):
        return G.POINT_EPOCH[point]

    def inject_extra(self, arm):
        return {"strata": arm.strata} if arm.strata != "none" else {}

    def slim(self, r):
        return slim(r)

    # ------------------------------------------------------------ the per-trial rate
    def rate(self, trials):
        """A `trials`-trial campaign (one uniform flip of the bf16 weights) per (mode, point), timed: CPU seconds of
        the campaign and its children per trial, and wall seconds per trial."""
        out = {}
        for mode, point in RATE_KEYS:
            g = (G.MODEL, mode, G.OPT, 1)
            if not self.golden(g):
                die(f"golden run {G.golden_name(*g)} failed")
            arm = G.Arm(name=f"rate-{mode}-{point}", kind="campaign", model=G.MODEL, mode=mode, opt=G.OPT, seed=1, point=point,
                        role="model", flips=1, bits=None, n=trials, replica=False, family="rate", strata="none")
            cdir = os.path.join(self.dir, "campaigns", arm.name)
            if os.path.exists(cdir):
                subprocess.run(["rm", "-rf", cdir], check=True)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.time()
            self.campaign(arm)
            wall = time.time() - t0
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
            recs = D.read_records(cdir)
            # the campaign's golden resume is one more run of the same command: trials + 1 runs
            runs = len(recs) + 1
            out[f"{mode}-{point}"] = {"cpu_seconds": cpu / runs, "wall_seconds": wall / runs, "runs": runs,
                                      "trial_wall_seconds": [r.get("wall_seconds") for r in recs]}
            D.log(f"rate {mode} {point}: {cpu / runs:.1f} CPU-s and {wall / runs:.1f} wall-s per trial ({runs} runs)")
        load = os.getloadavg()
        doc = {"plan": self.plan, "trials": trials, "ranks": G.RANKS, "cores": os.cpu_count(), "load_average": [round(x, 2) for x in load],
               "rates": out, "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        os.makedirs(self.publish_dir, exist_ok=True)
        path = os.path.join(self.publish_dir, "rates.json")
        D.write_or_die(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        self.git_commit([path], f"{self.title}: measured per-trial rates")
        return doc


def slim(r):
    """dp_vs_mp's slim record, plus what a gpt trial adds: test_bpb, the stratum, and per flip its dtype and (tp) the
    flipped element's index in the global tensor."""
    s = D.slim(r)
    summ = r.get("summary") or {}
    if "test_bpb" in summ:
        s["summary"]["test_bpb"] = summ["test_bpb"]
    s["stratum"] = r.get("stratum")
    s["flip_extra"] = [[f.get("dtype"), f.get("global_index")] for f in r.get("flips", [])]
    return s


# ------------------------------------------------------------ budget

def load_rates(publish):
    """PUBLISH/rates.json (`rate`), or None where there is none; a file that is not one is one error line, exit 4."""
    path = os.path.join(publish, "rates.json")
    if not os.path.exists(path):
        return None
    try:
        doc = json.load(open(path))
        str(doc["measured"]), int(doc["trials"]), int(doc["ranks"]), float(doc["load_average"][0]), int(doc["cores"])
        for k, v in doc["rates"].items():
            float(v["cpu_seconds"]), float(v["wall_seconds"])
        for key in ("dp-late", "dp-early"):  # what a mode without its own rate is costed at
            doc["rates"][key]
        return doc
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        die(f"{path}: not a rates.json of `transformer.py rate` ({type(e).__name__}: {e})", 4)


def arm_cost_key(arm):
    return f"{arm.mode}-{arm.point}"


def budget(arms, rates):
    """CPU seconds per arm from the measured rate of its mode and point; None where there is no rate."""
    if not rates:
        return None
    r = rates["rates"]
    rows = []
    for a in arms:
        key = arm_cost_key(a)
        if key not in r:
            key = f"dp-{a.point}"  # a mode without its own rate: dp's at the same point
        rows.append((a, a.n * r[key]["cpu_seconds"], a.n * r[key]["wall_seconds"]))
    return rows


def print_budget(arms, rates, cores):
    rows = budget(arms, rates)
    if rows is None:
        print("CPU budget: no measured rate yet (run `scripts/study/transformer.py rate` first)")
        return None
    cpu = sum(c for _, c, _ in rows)
    r = rates["rates"]
    print(f"CPU budget (rates measured {rates['measured']}, {rates['trials']} trials per mode and point, load average "
          f"{rates['load_average'][0]} on {rates['cores']} cores):")
    for k, v in sorted(r.items()):
        print(f"  {k:10s} {v['cpu_seconds']:6.1f} CPU-s, {v['wall_seconds']:6.1f} wall-s per trial")
    fam = {}
    for a, c, _ in rows:
        fam[a.family] = fam.get(a.family, 0) + c
    for f, c in fam.items():
        print(f"  family {f:8s} {c / 3600:7.1f} CPU-h")
    print(f"  total {sum(a.n for a in arms)} trials: {cpu / 3600:.1f} CPU-h = {cpu / 3600 / cores:.1f} h on {cores} free cores")
    return cpu


def cmd_plan(args):
    arms = G.arms(args.plan)
    print("Interval-width targets (95 % Clopper-Pearson) and the trials they need:")
    for fam, t in G.TARGETS.items():
        if "width" in t:
            # n_max: every target here is met below 2,000 trials, and the search then costs seconds, not a minute
            n = S.trials_for_width(t['p'], t['width'], n_max=N_MAX)
            print(f"  {fam:8s} rate {100 * t['p']:.0f} % to within {100 * t['width']:.0f} points: n >= {n}"
                  f"  ({t['why']})")
        else:
            print(f"  {fam:8s} {t['why']}")
    print(f"\n{len(arms)} arms, in the order they run:")
    for a in arms:
        print(f"  {a.name:26s} {a.kind:8s} n={a.n:4d}  {a.mode} seed {a.seed} {a.point} role {a.role} flips {a.flips}"
              f" bits {a.bits or 'all'}{' strata ' + a.strata if a.strata != 'none' else ''}{' one replica' if a.replica else ''}")
    print(f"{sum(a.n for a in arms)} trials and fault-free resumes in all\n")
    print_budget(arms, load_rates(os.path.abspath(args.publish)), args.cores)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("plan", "rate", "run", "publish", "report"))
    ap.add_argument("--plan", choices=("full", "smoke"), default="full")
    ap.add_argument("--dir", default=DEFAULT_DIR, help="study working directory (default out/transformer-study)")
    ap.add_argument("--publish", default=DEFAULT_PUBLISH, help="where finished arms' records go (default docs/results/transformer-study)")
    ap.add_argument("--only", nargs="+", default=None, help="run only these arms (names as `plan` prints them)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--trials", type=int, default=3, help="rate: trials per mode and point")
    ap.add_argument("--cores", type=int, default=2, help="plan/run: cores the budget's wall time assumes")
    ap.add_argument("--build", default="build")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--commit", action="store_true", help="git-commit each finished arm's records")
    ap.add_argument("--live", default=None, help="report: also read the running arms from this study directory")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "transformer.md"))
    ap.add_argument("--no-plots", action="store_true", help="report: no PNGs")
    args = ap.parse_args()
    D.PROG = "transformer.py"
    D.stop_on_sigterm()
    if args.trials < 1:
        die("--trials must be at least 1")
    if args.jobs < 1:
        die("--jobs must be at least 1")
    if args.command == "plan":
        return cmd_plan(args)
    if args.command == "report":
        import transformer_report
        return transformer_report.main(args)
    arms = G.arms(args.plan)
    if args.only:
        names = {a.name for a in arms}
        bad = [o for o in args.only if o not in names]
        if bad:
            die(f"--only: no arm named {', '.join(bad)} (see `plan`)")
        arms = [a for a in arms if a.name in args.only]
    st = GptStudy(args)
    if args.command == "publish":
        return st.publish_all(arms)
    for exe in ("ckpt-train", "ckpt-flip"):
        if not os.access(os.path.join(st.bin, exe), os.X_OK):
            die(f"build {exe} first ({st.bin})")
    if args.command == "rate":
        st.rate(args.trials)
        return
    print_budget(arms, load_rates(st.publish_dir), args.cores)
    try:
        st.run(arms)
    except OSError as e:  # a full disk, a directory gone: one line, not a traceback
        D.die(f"{e.filename}: {e.strerror}" if e.filename else str(e), 3)
    D.log("all arms complete")


if __name__ == "__main__":
    main()
