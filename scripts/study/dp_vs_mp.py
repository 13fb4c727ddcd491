#!/usr/bin/python3
"""The dp-vs-mp fault-injection study (method: docs/design/study-method.md).

  dp_vs_mp.py plan   [--plan full|smoke]                  arms, trial counts, the widths they buy
  dp_vs_mp.py run    [--plan full|smoke] [--dir D] [--only ARM ...] [--models mlp cnn] [--jobs 1]
                     [--publish DIR] [--commit]
  dp_vs_mp.py publish [--dir D] [--publish DIR]           records of finished arms -> DIR/*.jsonl.gz, the trials
                                                          of unfinished ones -> DIR/partial/*.tar.gz
  dp_vs_mp.py report [--publish DIR] [--live D] [--out docs/results/dp-vs-mp.md]

`run` trains the golden runs (3 epochs, a checkpoint per epoch, 4 ranks or stages), then runs the arms in
the order of scripts/study/plan.py: each a `ckpt-flip campaign` (or a set of fault-free resumes with other
data orders) in D/campaigns/NAME. It resumes: golden runs are reused, campaigns skip recorded trials, so
kill it at any point and start the same command again. After each arm completes its records are written,
slimmed and gzipped, to DIR/NAME.jsonl.gz (default docs/results/dp-vs-mp-study), and with --commit
committed (`git commit` of that one file and DIR/goldens.json). Progress: one line per arm and per 10 trials.
One run per D at a time (D/lock; `publish` may run beside it); SIGTERM or SIGINT stops the study and its
running campaign or resume, and kill -9 of the study stops them too. A publish DIR holds one study's records of one
plan (goldens.json names both); its writers take turns (flock on DIR). In a D that holds none of an arm's trials, `run` first restores those `publish` kept in
DIR/partial (a new machine continues where the old one stopped), after checking that the golden runs trained again
give exactly the published numbers.

Exit codes (resil's, docs/reference/exit-codes.md): 0 done; 1 a golden run or a fault-free resume failed (the
next run repeats it); 2 bad option, --dir or --publish of another plan, --publish of another study, --commit with a --publish outside the
checkout or ignored by git; 3 a golden checkpoint missing, a file that cannot be written (full disk, read-only
--publish), D in use by another run; 4 a published file that is not a complete record of the plan's arm
(damaged, another plan's);
7 a golden checkpoint whose bytes changed under a data-order arm, or a golden run trained again whose numbers differ
from the published one's (goldens.json); 128 + N stopped by signal N; a campaign's
own exit code when it fails. Each error is one line naming the file or option; nothing is left half-written.

Examples:
  scripts/study/dp_vs_mp.py plan
  nice -n 19 scripts/study/dp_vs_mp.py run --jobs 1 --commit          # the full study, resumable
  scripts/study/dp_vs_mp.py run --plan smoke --dir out/study-smoke --publish out/study-smoke/pub
  scripts/study/dp_vs_mp.py report
"""
import argparse
import contextlib
import ctypes
import fcntl
import functools
import gzip
import hashlib
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import plan as P  # noqa: E402
import stats as S  # noqa: E402

DEFAULT_DIR = os.path.join(ROOT, "out", "dp-vs-mp-study")
DEFAULT_PUBLISH = os.path.join(ROOT, "docs", "results", "dp-vs-mp-study")


_child = None  # the long-running child (a campaign, a training, a resume) that SIGTERM is passed on to


_libc = ctypes.CDLL(None, use_errno=True)


def end_with_study():
    """preexec_fn of every child: it gets SIGTERM when the study dies, even of kill -9 (Linux's PR_SET_PDEATHSIG),
    so no campaign or resume runs on orphaned, holding its campaign's lock against the next run."""
    parent = os.getppid()  # the study (this runs in the forked child)
    if hasattr(_libc, "prctl"):
        _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the study died between the fork and the prctl
        os.kill(os.getpid(), signal.SIGTERM)


def run_child(cmd, timeout=None, **kw):
    """subprocess.run for the study's long children: a SIGTERM to the study (kill, a scheduler's end of job) reaches
    the child too (stop_on_sigterm), so a campaign stops its trial and exits instead of running on orphaned; so
    does the study's death by kill -9 (end_with_study)."""
    global _child
    with subprocess.Popen(cmd, preexec_fn=end_with_study, **kw) as p:
        _child = p
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
        finally:
            _child = None
    return subprocess.CompletedProcess(cmd, rc)


_deferred = None  # inside run_git: the stopping signal received meanwhile (0: none yet)


def run_git(*args):
    """git -C ROOT ARGS, output captured. A SIGTERM or SIGINT to the study meanwhile takes effect when git returns:
    stopped mid-commit (subprocess.run kills its child with SIGKILL on an exception), git would leave
    .git/index.lock behind, and every later git command in the checkout would fail until someone removed it."""
    global _deferred
    _deferred = 0
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, start_new_session=True)
    finally:
        sig, _deferred = _deferred, None
        if sig:
            raise SystemExit(128 + sig)


def stop_on_sigterm():
    """SIGTERM, and SIGINT (Ctrl-C, kill -INT) unless it is ignored (a background job), stop the study and its running
    child: exit 128 + the signal, no traceback."""
    def on_term(sig, _frame):
        global _deferred
        if _deferred is not None:  # run_git: after git returns
            _deferred = sig
            return
        if _child is not None and _child.poll() is None:
            _child.send_signal(sig)
        raise SystemExit(128 + sig)  # Popen's exit waits for the child to end
    signal.signal(signal.SIGTERM, on_term)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_term)


def children_cpu():
    """User + system CPU seconds of the processes this one has reaped (a resume's launcher and its ranks)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, flush=True)


PROG = "dp_vs_mp.py"  # the error lines' program name (transformer.py sets its own)


def die(msg, code=2):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def write_atomic(path, data):
    """Write `data` (str or bytes) to `path` through a temporary file in the same directory, synced, then renamed
    over it: a reader never sees a half-written file, and an error (full disk, read-only directory) leaves `path`
    as it was and no temporary file behind. Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_or_die(path, data):
    """write_atomic (and the directory it goes in); an error is one line naming the file, exit 3 (io)."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_atomic(path, data)
    except OSError as e:
        die(f"{path}: cannot write: {e.strerror or e}", 3)


class BadRecords(Exception):
    """A published arm file that is not a complete record of the arm it is read for (the message names the file)."""


def read_published(path, arm=None):
    """(head, records) of a published arm file PUBLISH/NAME.jsonl.gz. Raises BadRecords, naming the file, when it is
    not a whole gzip stream of JSON lines, when its head does not say `arm` (another plan's, seed's or study's
    records under the same name), or when it holds another number of records, or a trial twice, than its head says."""
    try:
        with gzip.open(path, "rt") as f:
            head = json.loads(f.readline())["head"]
            recs = [json.loads(line) for line in f if line.strip()]
        n, trials = head["records"], [r["trial"] for r in recs]
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as e:
        raise BadRecords(f"{path}: not a complete published record file ({type(e).__name__}: {e})") from None
    if arm is not None and head.get("arm") != arm._asdict():
        want = arm._asdict()
        have = head.get("arm") if isinstance(head.get("arm"), dict) else {}
        diff = ", ".join(f"{k}={have.get(k)!r} (the plan's: {v!r})" for k, v in want.items() if have.get(k) != v)
        raise BadRecords(f"{path}: records of another arm than the plan's {arm.name}: {diff or 'other keys'}")
    if len(recs) != n or len(set(trials)) != len(trials):
        raise BadRecords(f"{path}: {len(recs)} records of {len(set(trials))} trials, where its head says {n}")
    return head, recs


def read_goldens(path):
    """PUBLISH/goldens.json, or None where there is none. Raises BadRecords, naming the file, when it is not one."""
    if not os.path.exists(path):
        return None
    try:
        gold = json.load(open(path))
        if gold["plan"] not in ("full", "smoke") or not isinstance(gold["goldens"], dict):
            raise ValueError(f"plan {gold['plan']!r}")
        return gold
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadRecords(f"{path}: not a study's goldens.json ({type(e).__name__}: {e})") from None


def publishing(method):
    """A Study method that writes PUBLISH: it runs under the study's publish_lock."""
    @functools.wraps(method)
    def locked(self, *args, **kw):
        with self.publish_lock():
            return method(self, *args, **kw)
    return locked


class Study:
    """One study's run and publishing machinery. A study is its plan module (arms, recipes, sizes) and the few
    things a subclass overrides: the metric trials are classified on, how golden runs are evaluated, which
    checkpoint a point names, the commit messages."""
    P = P                    # the plan module: arms(), goldens(), golden_name(), RANKS, EPOCHS, TEST_LIMIT, ...
    title = "dp-vs-mp study"  # commit messages
    study = "dp-vs-mp"        # goldens.json names it: a --publish holds one study's records
    metric = "test_accuracy"  # the summary key trials are classified on
    higher_is_better = True
    tolerance = 0.01
    full_eval_limit = 10000   # the golden's final checkpoint is also evaluated on this many test samples (0 = all)
    summary_keys = ("test_accuracy", "test_loss", "final_loss", "loss_curve", "nan_detected", "steps")
    resume_options = ()       # more `ckpt-train resume` options of every trial and fault-free resume

    def __init__(self, args):
        self.dir = os.path.abspath(args.dir)
        self.plan = args.plan
        self.bin = os.path.abspath(os.path.join(ROOT, args.build, "bin"))
        self.mpiexec = args.mpiexec
        self.jobs = args.jobs
        self.publish_dir = os.path.abspath(args.publish)
        self.commit = args.commit
        self._publish_depth = 0  # publish_lock's nesting
        self._publish_unlocked = False  # publish_lock found no flock on PUBLISH (warned)
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError as e:
            die(f"--dir: cannot create {self.dir}: {e.strerror}", 3)
        if args.command != "publish":  # publish only reads D (and writes PUBLISH atomically): it may run beside a run
            self.lock()
        self.stamp_plan()
        self.check_publish_plan()
        self.check_publish_writable()
        if self.commit:
            self.check_commit()

    def lock(self):
        """One run of the study per directory at a time (two would train the same golden run into one directory and
        record the same noise trials twice): D/lock is flock'ed while this process lives; the kernel drops the lock
        when it ends, however it ends, so a killed run leaves no stale lock."""
        path = os.path.join(self.dir, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
            die(f"{self.dir} is in use by another run of the study (pid {pid}): wait for it to end, or use another --dir", 3)
        except OSError as e:  # a filesystem without flock (Lustre mounted without it): run, unguarded
            log(f"warning: {path}: cannot lock ({e.strerror}): a second run on this directory would not be refused")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd  # held until this process ends

    def stamp_plan(self):
        """A study directory belongs to one plan: its recipes and sizes are in the golden parameters."""
        f = os.path.join(self.dir, "plan")
        if os.path.exists(f):
            have = open(f).read().strip()
            if have != self.plan:
                die(f"{self.dir} holds the '{have}' plan, not '{self.plan}': use another --dir")
        else:
            open(f, "w").write(self.plan + "\n")

    def check_publish_plan(self):
        """A publish directory holds one study's records of one plan: a smoke run must not publish into the full
        study's, nor the transformer study into the dp-vs-mp study's (each would rewrite the other's goldens.json).
        A goldens.json that names no study was written before it did, by either: accepted, and named when next written."""
        path = os.path.join(self.publish_dir, "goldens.json")
        try:
            gold = read_goldens(path)
        except BadRecords as e:
            die(str(e), 4)
        if gold and gold.get("study", self.study) != self.study:
            die(f"{path}: --publish holds the {gold['study']} study's records, not the {self.study} study's: use another --publish")
        if gold and gold["plan"] != self.plan:
            die(f"{path}: --publish holds the '{gold['plan']}' plan's records, not '{self.plan}': use another --publish")

    @contextlib.contextmanager
    def publish_lock(self):
        """Writers of PUBLISH one at a time: two runs on one --publish (two --dir, or `publish` beside `run`) each read,
        merge and write goldens.json, and write the snapshots of the same arm. The lock is flock on the directory
        itself, so no file is left in the checkout; it is taken once per process (nested calls pass through) and
        dropped by the kernel however the process ends."""
        if self._publish_depth:
            self._publish_depth += 1
            try:
                yield
            finally:
                self._publish_depth -= 1
            return
        try:
            os.makedirs(self.publish_dir, exist_ok=True)
            fd = os.open(self.publish_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            die(f"--publish: cannot open {self.publish_dir}: {e.strerror}", 3)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log(f"waiting for another writer of {self.publish_dir}")
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:  # a filesystem without flock: written unguarded, as D is (said once)
                if not self._publish_unlocked:
                    log(f"warning: {self.publish_dir}: cannot lock ({e.strerror}): two writers of it would not be kept apart")
                self._publish_unlocked = True
            self._publish_depth = 1
            yield
        finally:
            self._publish_depth = 0
            os.close(fd)

    def check_publish_writable(self):
        """Before the golden runs: the records of finished arms can be written to --publish."""
        try:
            os.makedirs(self.publish_dir, exist_ok=True)
        except OSError as e:
            die(f"--publish: cannot create {self.publish_dir}: {e.strerror}", 3)
        if not os.access(self.publish_dir, os.W_OK):
            die(f"--publish: cannot write to {self.publish_dir}", 3)

    def check_commit(self):
        """--commit: the records go to --publish inside this checkout, in a path git does not ignore (else each commit
        would fail only after the arm ran)."""
        top = run_git("rev-parse", "--show-toplevel")
        if top.returncode != 0:
            die(f"--commit: {ROOT} is not a git checkout")
        top = os.path.realpath(top.stdout.strip())
        pub = os.path.realpath(self.publish_dir)
        if os.path.commonpath([top, pub]) != top:
            die(f"--commit: --publish {self.publish_dir} is outside the checkout {top}")
        if run_git("check-ignore", "-q", os.path.join(pub, "goldens.json")).returncode == 0:
            die(f"--commit: git ignores --publish {self.publish_dir}")

    def recipe(self, g):
        """The `ckpt-train train` options of golden g = (model, mode, opt, seed) besides model, parallel, epochs and seed."""
        model, _, opt, _ = g
        return P.RECIPES[(model, opt)] if self.plan == "full" else P.SMOKE_RECIPE + (" --optimizer sgd --momentum 0.9 --lr 0.02" if opt == "sgdm" else "")

    def loss_every(self, model):
        return self.P.LOSS_EVERY[model] if self.plan == "full" else self.P.SMOKE_LOSS_EVERY

    def test_limit(self):
        return self.P.TEST_LIMIT if self.plan == "full" else 200

    def ranks(self, mode):
        return self.P.RANKS

    def point_epoch(self, point):
        """The epoch after which the checkpoint of an injection point was written."""
        return 1 if point == "early" else self.P.EPOCHS - 1

    # ------------------------------------------------------------ golden runs
    def golden_dir(self, g):
        return os.path.join(self.dir, "golden", self.P.golden_name(*g))

    def golden(self, g):
        model, mode, opt, seed = g
        d = self.golden_dir(g)
        params = f"ranks={self.ranks(mode)} epochs={self.P.EPOCHS} seed={seed} test_limit={self.test_limit()} {self.recipe(g)}"
        done = os.path.join(d, "golden-train.json")
        if os.path.exists(done):
            if open(os.path.join(d, "golden-params")).read().strip() != params:
                die(f"{d} was trained with other parameters: use another --dir")
            self.check_reproduces(g, d, params)
            return True
        log(f"golden run {self.P.golden_name(*g)}: {params}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        t0 = time.time()
        cmd = [self.mpiexec, "-n", str(self.ranks(mode)), f"{self.bin}/ckpt-train", "train", "--model", model, "--parallel", mode,
               "--epochs", str(self.P.EPOCHS), "--seed", str(seed), *self.recipe(g).split(), "--test-limit", str(self.test_limit()),
               "--ckpt-dir", f"{d}/ckpt", "--metrics", f"{d}/golden-metrics.jsonl", "--summary", f"{d}/train.json"]
        with open(f"{d}/train.log", "w") as out:
            r = run_child(cmd, stdout=out, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            log(f"golden run {self.P.golden_name(*g)} failed (exit {r.returncode}, {d}/train.log): its arms are skipped")
            return False
        wall = time.time() - t0
        last = subprocess.run([f"{self.bin}/ckpt-train", "latest", "--ckpt-dir", f"{d}/ckpt"], check=True, capture_output=True,
                              text=True, preexec_fn=end_with_study).stdout.strip()
        subprocess.run([f"{self.bin}/ckpt-train", "eval", "--from", last, "--test-limit", str(self.full_eval_limit), "--summary", f"{d}/golden-eval-full.json"],
                       check=True, stdout=subprocess.DEVNULL, preexec_fn=end_with_study)
        open(f"{d}/train-seconds", "w").write(f"{wall:.1f}\n")
        open(f"{d}/golden-params", "w").write(params + "\n")
        os.replace(f"{d}/train.json", done)
        self.check_reproduces(g, d, params)
        return True

    def check_reproduces(self, g, d, params):
        """A golden run trained again (in a new --dir, on another machine, by another build) gives exactly the
        numbers of the one in PUBLISH/goldens.json, every epoch's losses and accuracies and the full evaluation:
        the published records were classified against that run, and resuming its arms from another would mix
        two studies. Exit 7 where it does not."""
        name = self.P.golden_name(*g)
        pub = read_goldens(os.path.join(self.publish_dir, "goldens.json"))
        if not pub or pub["plan"] != self.plan or name not in pub["goldens"]:
            return
        old = pub["goldens"][name]
        if old.get("params") != params:
            return  # another recipe: publish_goldens replaces it, check_published has vetted the records
        def numbers(epochs):
            return [{k: v for k, v in e.items() if not k.endswith("seconds")} for e in epochs]
        new_epochs = numbers(read_jsonl(os.path.join(d, "golden-metrics.jsonl")))
        full_key = f"full_{self.metric}"
        new_full = json.load(open(os.path.join(d, "golden-eval-full.json")))[self.metric]
        for old_e, new_e in zip(numbers(old["epochs"]), new_epochs):
            if old_e != new_e:
                diff = ", ".join(f"{k} {new_e.get(k)!r} (published {old_e.get(k)!r})" for k in sorted(set(old_e) | set(new_e))
                                 if old_e.get(k) != new_e.get(k))
                die(f"{d}: golden run {name} does not reproduce the published one at epoch {new_e.get('epoch')}: {diff}; "
                    f"the published records were classified against that run (docs/design/determinism.md)", 7)
        if len(new_epochs) != len(old["epochs"]) or new_full != old.get(full_key):
            die(f"{d}: golden run {name} does not reproduce the published one: {len(new_epochs)} epochs, {full_key} "
                f"{new_full!r} (published {len(old['epochs'])} epochs, {old.get(full_key)!r})", 7)

    def checkpoint(self, g, point):
        d = os.path.join(self.golden_dir(g), "ckpt")
        sharded = g[1] != "dp"  # mp, pp and tp checkpoints are shard sets committed by a manifest
        files = sorted(f for f in os.listdir(d) if f.startswith("ckpt-step") and (f.endswith(".manifest.json") if sharded else f.endswith(".h5")))
        if len(files) != self.P.EPOCHS:
            die(f"{d} holds {len(files)} checkpoints, not {self.P.EPOCHS}", 3)
        return os.path.join(d, files[self.point_epoch(point) - 1])

    # ------------------------------------------------------------ arms
    def resume_cmd(self, arm, ckpt_arg, extra=()):
        return [self.mpiexec, "-n", str(self.ranks(arm.mode)), f"{self.bin}/ckpt-train", "resume", *ckpt_arg, "--epochs", str(self.P.EPOCHS),
                "--ckpt-dir", "{dir}", "--summary", "{out}", "--loss-every", str(self.loss_every(arm.model)), *self.resume_options, *extra]

    def campaign(self, arm):
        if self.published_complete(arm):
            return
        g = (arm.model, arm.mode, arm.opt, arm.seed)
        ckpt = self.checkpoint(g, arm.point)
        self.restore(arm, ckpt)
        if arm.replica:
            # rank REPLICA_RANK loads the altered copy, every other rank the golden file itself
            cmd = self.resume_cmd(arm, ["--from", ckpt, "--replica-from", f"{self.P.REPLICA_RANK}={{ckpt}}"])
        else:
            cmd = self.resume_cmd(arm, ["--from", "{ckpt}"], ["--replica-divergence"] if arm.mode == "dp" else [])
        inject = {"flips": arm.flips, "model": "flip", "role": arm.role, "strata": "none"}
        if arm.bits:
            inject["bits"] = arm.bits
        inject.update(self.inject_extra(arm))
        cfg = {"name": arm.name, "checkpoint": ckpt, "command": cmd, "trials": arm.n, "seed": 1, "timeout_s": 1800,
               "inject": inject, "metric": self.metric, "tolerance": self.tolerance}
        if not self.higher_is_better:
            cfg["higher_is_better"] = False
        os.makedirs(os.path.join(self.dir, "configs"), exist_ok=True)
        cpath = os.path.join(self.dir, "configs", arm.name + ".json")
        text = json.dumps(cfg, indent=1) + "\n"
        if not os.path.exists(cpath) or open(cpath).read() != text:
            open(cpath, "w").write(text)
        out = os.path.join(self.dir, "campaigns", arm.name)
        have = len(read_records(out))
        if have >= arm.n:
            return
        log(f"campaign {arm.name}: {arm.n} trials ({have} recorded), {arm.flips} flip(s), role {arm.role}, bits {arm.bits or 'all'}"
            f"{', strata ' + inject['strata'] if inject['strata'] != 'none' else ''}, "
            f"{arm.point} checkpoint {os.path.basename(ckpt)}")
        r = run_child([f"{self.bin}/ckpt-flip", "campaign", cpath, "--out", out, "--jobs", str(self.jobs), "--quiet"])
        if r.returncode != 0:
            die(f"campaign {arm.name} ended with exit {r.returncode}", r.returncode)

    def order_noise(self, arm):
        """Fault-free resumes of the golden checkpoint whose data order comes from another seed."""
        if self.published_complete(arm):
            return
        g = (arm.model, arm.mode, arm.opt, arm.seed)
        ckpt = self.checkpoint(g, arm.point)
        self.restore(arm, ckpt)
        out = os.path.join(self.dir, "campaigns", arm.name)
        os.makedirs(out, exist_ok=True)
        rec_path = os.path.join(out, "records.jsonl")
        cut_torn_line(rec_path)
        have = {r["trial"] for r in read_jsonl(rec_path)}
        todo = [k for k in range(arm.n) if k not in have]
        if not todo:
            return
        log(f"data-order noise {arm.name}: {arm.n} resumes ({len(have)} recorded), {arm.point} checkpoint {os.path.basename(ckpt)}")
        golden = self.golden_resume(arm, ckpt)
        for k in todo:
            scratch = os.path.join(out, "scratch")
            shutil.rmtree(scratch, ignore_errors=True)
            os.makedirs(scratch)
            summ = os.path.join(scratch, "summary.json")
            shuffle_seed = 1000003 * (k + 1)
            cmd = [c.replace("{dir}", os.path.join(scratch, "ckpt")).replace("{out}", summ)
                   for c in self.resume_cmd(arm, ["--from", ckpt], ["--shuffle-seed", str(shuffle_seed)])]
            t0, cpu0 = time.time(), children_cpu()
            out_log = os.path.join(scratch, "resume.log")
            with open(out_log, "w") as lf:
                try:
                    rc = run_child(cmd, stdout=lf, stderr=subprocess.STDOUT, timeout=3600).returncode
                except subprocess.TimeoutExpired:
                    rc = "a timeout of 3600 s"
            s = json.load(open(summ)) if os.path.exists(summ) else {}
            m = s.get(self.metric)
            if rc != 0 or m is None:
                # a fault-free resume that fails (killed, out of memory, a broken node) is no sample of the noise:
                # it is not recorded, and the study stops on it
                kept = os.path.join(out, f"trial-{k}-failed.log")
                os.replace(out_log, kept)
                why = (f"exit {rc}" if isinstance(rc, int) else rc) if rc != 0 else f"no {self.metric} in its summary"
                die(f"the fault-free resume {k} of {arm.name} failed ({why}; its output: {kept}): not recorded, the next run repeats it", 1)
            rec = {"trial": k, "class": "noise", "shuffle_seed": shuffle_seed, "exit_code": rc,
                   "metric": m, "golden_metric": golden[self.metric],
                   "delta": None if m is None else m - golden[self.metric],
                   "summary": {k2: s.get(k2) for k2 in self.summary_keys},
                   "wall_seconds": time.time() - t0, "cpu_seconds": children_cpu() - cpu0}
            with open(rec_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())
            shutil.rmtree(scratch, ignore_errors=True)
        return

    def golden_resume(self, arm, ckpt):
        """The fault-free resume of `ckpt` with its own data order (what every trial is compared with)."""
        out = os.path.join(self.dir, "campaigns", arm.name)
        path = os.path.join(out, "golden.json")
        digest = checkpoint_sha256(ckpt)
        if os.path.exists(path):
            doc = json.load(open(path))
            if "checkpoint_sha256" not in doc:  # written before the digest was kept: it is kept from now on
                write_atomic(path, json.dumps({**doc, "checkpoint_sha256": digest}))
            elif doc["checkpoint_sha256"] != digest:
                die(f"{ckpt}: the golden checkpoint's bytes differ from those {path} recorded: the arm's resumes ran from "
                    f"another checkpoint; restore that one, or use another --dir", 7)
            return doc["summary"]
        scratch = os.path.join(out, "golden-scratch")
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        summ = os.path.join(scratch, "summary.json")
        cmd = [c.replace("{dir}", os.path.join(scratch, "ckpt")).replace("{out}", summ) for c in self.resume_cmd(arm, ["--from", ckpt])]
        if run_child(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            die(f"the golden resume of {arm.name} failed: {' '.join(cmd)}", 1)
        s = json.load(open(summ))
        write_atomic(path, json.dumps({"summary": s, "checkpoint_sha256": digest}))
        shutil.rmtree(scratch, ignore_errors=True)
        return s

    def published_complete(self, arm):
        """An arm whose records are already published at its planned size (by an earlier run, in another
        directory or on another machine: the runs are deterministic, and golden() checks that its golden run
        reproduces) is not run again."""
        path = self.published(arm)
        if not os.path.exists(path):
            return False
        try:
            return read_published(path, arm)[0]["records"] >= arm.n
        except BadRecords as e:
            die(f"{e}; move it away to run the arm again", 4)

    def recorded(self, arm):
        """The trial records the arm's directory in D holds."""
        out = os.path.join(self.dir, "campaigns", arm.name)
        return read_order(out) if arm.kind == "order" else read_records(out)

    def arm_done(self, arm):
        return self.published_complete(arm) or len(self.recorded(arm)) >= arm.n

    def check_published(self, arms):
        """Before anything runs: every arm file already in PUBLISH is a complete record of its arm in this plan."""
        for arm in arms:
            if os.path.exists(self.published(arm)):
                try:
                    read_published(self.published(arm), arm)
                except BadRecords as e:
                    die(f"{e}; move it away to publish the arm from {self.dir}", 4)

    def publish_all(self, arms):
        """The `publish` command: goldens.json and the records of every finished arm."""
        self.check_published(arms)
        self.publish_goldens(arms)
        for a in arms:
            if self.arm_done(a):
                self.publish(a)
            else:
                self.snapshot(a)

    def run(self, arms):
        self.check_published(arms)
        ok = {g: self.golden(g) for g in self.P.goldens(arms)}
        self.publish_goldens(arms)
        skipped = []
        for arm in arms:
            if not ok[(arm.model, arm.mode, arm.opt, arm.seed)]:
                if not self.arm_done(arm):
                    skipped.append(arm.name)
                continue
            t0 = time.time()
            if arm.kind == "order":
                self.order_noise(arm)
            else:
                self.campaign(arm)
            if self.arm_done(arm):
                if self.publish(arm) and time.time() - t0 > 1:
                    log(f"arm {arm.name} complete: {os.path.relpath(self.published(arm), ROOT)}")
        if skipped:  # the study is not complete: no exit 0 for a scheduler to take as done
            failed = ", ".join(self.golden_dir(g) + "/train.log" for g, v in ok.items() if not v)
            die(f"{len(skipped)} arm(s) not run, their golden run failed ({failed}); the next run trains it again", 1)

    # ------------------------------------------------------------ publishing
    def published(self, arm):
        return os.path.join(self.publish_dir, arm.name + ".jsonl.gz")

    @publishing
    def publish_goldens(self, arms):
        path = os.path.join(self.publish_dir, "goldens.json")
        gold = {}
        old = read_goldens(path)  # check_publish_plan: this plan's, if any
        if old and old["plan"] == self.plan:
            gold = old["goldens"]  # goldens of arms this run does not name (--only) stay published
        for g in self.P.goldens(arms):
            d = self.golden_dir(g)
            if not os.path.exists(os.path.join(d, "golden-train.json")):
                continue
            gold[self.P.golden_name(*g)] = {
                "model": g[0], "mode": g[1], "optimizer": g[2], "seed": g[3],
                "params": open(os.path.join(d, "golden-params")).read().strip(),
                "train": json.load(open(os.path.join(d, "golden-train.json"))),
                "epochs": read_jsonl(os.path.join(d, "golden-metrics.jsonl")),
                f"full_{self.metric}": json.load(open(os.path.join(d, "golden-eval-full.json")))[self.metric],
                "train_seconds": float(open(os.path.join(d, "train-seconds")).read())}
        text = json.dumps({"study": self.study, "plan": self.plan, "ranks": self.P.RANKS, "epochs": self.P.EPOCHS, "test_limit": self.test_limit(), "goldens": gold},
                          indent=1, sort_keys=True) + "\n"
        if not os.path.exists(path) or open(path).read() != text:
            write_or_die(path, text)
            self.git_commit([path], f"{self.title}: golden runs")

    @publishing
    def publish(self, arm):
        """Write the arm's records, slimmed, to PUBLISH/NAME.jsonl.gz (once, when complete)."""
        dst = self.published(arm)
        if os.path.exists(dst):
            try:
                read_published(dst, arm)
            except BadRecords as e:
                die(f"{e}; move it away to publish the arm from {self.dir}", 4)
            if self.commit and run_git("ls-files", "--error-unmatch", dst).returncode != 0:
                self.git_commit([dst], f"{self.title}: records of {arm.name}")
            return False
        out = os.path.join(self.dir, "campaigns", arm.name)
        if arm.kind == "order":
            recs = read_order(out)
            golden = json.load(open(os.path.join(out, "golden.json")))["summary"]
        else:
            recs = [self.slim(r) for r in read_records(out)]
            golden = json.load(open(os.path.join(out, "golden.json")))["summary"]
        head = {"arm": arm._asdict(), "golden_summary": {k: golden.get(k) for k in (*self.summary_keys[:4], "numeric", "replica_divergence")},
                "records": len(recs), **self.head_extra(arm)}
        os.makedirs(self.publish_dir, exist_ok=True)
        buf = io.BytesIO()
        with gzip.GzipFile(dst + ".tmp", "wb", fileobj=buf, mtime=0) as f:  # the name in the gzip header: NAME.jsonl.gz.tmp
            f.write((json.dumps({"head": head}) + "\n").encode())
            for r in recs:
                f.write((json.dumps(r, separators=(",", ":")) + "\n").encode())
        write_or_die(dst, buf.getvalue())
        paths = [dst]
        part = self.partial(arm)
        if os.path.exists(part):  # the unfinished arm's snapshot: superseded
            os.unlink(part)
            if run_git("ls-files", "--error-unmatch", part).returncode == 0:
                paths.append(part)
        self.git_commit(paths, f"{self.title}: records of {arm.name} ({len(recs)} trials)")
        return True

    # ------------------------------------------------------------ unfinished arms across machines
    def partial(self, arm):
        return os.path.join(self.publish_dir, "partial", arm.name + ".tar.gz")

    @publishing
    def snapshot(self, arm):
        """`publish` of an unfinished arm: its campaign directory's records (every record whole, as the campaign
        resumes from them), campaign.json and golden.json, to PUBLISH/partial/NAME.tar.gz, so that a run in a new
        --dir (a new machine) continues the arm where this one stopped instead of repeating its trials."""
        out = os.path.join(self.dir, "campaigns", arm.name)
        n = len(self.recorded(arm))
        if n == 0:
            return
        names = ["golden.json"] + (["records.jsonl"] if arm.kind == "order" else ["campaign.json", "results"])
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for name in names:
                if os.path.exists(os.path.join(out, name)):
                    t.add(os.path.join(out, name), arcname=name)
        dst = self.partial(arm)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        write_or_die(dst, buf.getvalue())
        log(f"arm {arm.name}: {n} of {arm.n} trials kept in {os.path.relpath(dst, ROOT)}")
        self.git_commit([dst], f"{self.title}: {n} of {arm.n} trials of {arm.name} (unfinished)")

    def restore(self, arm, ckpt):
        """Before an arm starts in a directory that holds none of its trials: the trials of PUBLISH/partial/NAME.tar.gz,
        where that snapshot ran from this very checkpoint path (whose bytes the campaign checks against its
        campaign.json, and golden() against the published golden run)."""
        src = self.partial(arm)
        out = os.path.join(self.dir, "campaigns", arm.name)
        if not os.path.exists(src):
            return
        if self.recorded(arm):
            return
        try:
            with tarfile.open(src, "r:gz") as t:
                members = t.getmembers()
                if any(m.name.startswith(("/", "..")) or ".." in m.name.split("/") or not (m.isfile() or m.isdir()) for m in members):
                    raise ValueError("a member outside the campaign directory")
                if arm.kind != "order":
                    meta = json.load(t.extractfile("campaign.json"))
                    if meta.get("config", {}).get("checkpoint") != ckpt:
                        log(f"{src}: ran from {meta.get('config', {}).get('checkpoint')}, not {ckpt}: not used")
                        return
                os.makedirs(out, exist_ok=True)
                t.extractall(out, members=members)
        except (OSError, ValueError, KeyError, tarfile.TarError) as e:
            die(f"{src}: not an unfinished arm's snapshot ({type(e).__name__}: {e}); move it away to run the arm from its start", 4)
        log(f"arm {arm.name}: {len(self.recorded(arm))} trials restored from {os.path.relpath(src, ROOT)}")

    def slim(self, r):
        return slim(r)

    def head_extra(self, arm):
        """A campaign arm's fault space (stored bits per tensor, bit, role, dtype, and in all), read from the campaign's
        campaign.json: the weights of per-tensor and per-bit rates and the exposed memory of a FIT."""
        path = os.path.join(self.dir, "campaigns", arm.name, "campaign.json")
        if arm.kind != "campaign" or not os.path.exists(path):
            return {}
        return {"space": json.load(open(path)).get("space")}

    def inject_extra(self, arm):
        """More `inject` keys of an arm's campaign (strata, include)."""
        return {}

    def git_commit(self, paths, msg):
        if not self.commit:
            return
        # Another git command in the same checkout may hold the index lock for a moment: retry, and never
        # let a failed commit stop the study (the files stay in PUBLISH; `publish --commit` commits later).
        for attempt in range(10):
            a = run_git("add", "--", *paths)
            r = run_git("commit", "-q", "-m", msg, "--", *paths) if a.returncode == 0 else a
            if r.returncode == 0 or "nothing" in r.stdout + r.stderr:
                return
            if "index.lock" not in r.stderr:
                break  # not another git command holding the lock: waiting will not help
            time.sleep(3 * (attempt + 1))
        log(f"git commit of {', '.join(os.path.relpath(p, ROOT) for p in paths)} failed: {r.stderr.strip()}")


def checkpoint_sha256(ckpt):
    """SHA-256 over a checkpoint's files (an .h5, or a shard set's manifest and the files of its directory), each
    name and content: what a data-order arm's resumes ran from."""
    files = [ckpt]
    if ckpt.endswith(".manifest.json"):
        d = ckpt[:-len(".manifest.json")]
        files += sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs)
    h = hashlib.sha256()
    for f in files:
        h.update(os.path.relpath(f, os.path.dirname(ckpt)).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a torn last line of an interrupted run
    return out


def read_order(arm_dir):
    """The records of a data-order noise arm, one per trial (its first), in trial order."""
    recs = {}
    for r in read_jsonl(os.path.join(arm_dir, "records.jsonl")):
        recs.setdefault(r["trial"], r)
    return [recs[k] for k in sorted(recs)]


def cut_torn_line(path):
    """Cut a torn last line (a run killed mid-write) off a JSON-lines file, so the next record appended to it is a
    line of its own rather than the end of an unreadable one."""
    if not os.path.exists(path):
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def read_records(campaign_dir):
    """The trial records of a campaign directory, one per trial id."""
    d = os.path.join(campaign_dir, "results")
    recs = {}
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            if f.endswith(".jsonl"):
                for r in read_jsonl(os.path.join(d, f)):
                    recs[r["trial"]] = r
    return [recs[k] for k in sorted(recs)]


def _num(v):
    """A flip's value as a number ("nan", "inf", "-inf" in the records: the floats, written as NaN/Infinity)."""
    return float(v) if isinstance(v, str) else v


def slim(r):
    s = r.get("summary") or {}
    return {"trial": r["trial"], "class": r["class"], "metric": r.get("metric"), "golden_metric": r.get("golden_metric"),
            "delta": r.get("delta"), "exit_code": r.get("exit_code"), "signal": r.get("signal"), "note": r.get("note"),
            "n_flips": r.get("n_flips"), "injected_nonfinite": r.get("injected_nonfinite"),
            "field": (r.get("strata") or {}).get("field"), "numeric": r.get("numeric"),
            "flips": [[f.get("dataset"), f.get("file"), f.get("index"), f.get("bit"), _num(f.get("old_value")), _num(f.get("new_value"))]
                      for f in r.get("flips", [])],
            "summary": {k: s.get(k) for k in ("test_accuracy", "test_loss", "final_loss", "loss_curve", "replica_divergence", "nan_detected",
                                              "nan_step", "steps") if k in s},
            "wall_seconds": r.get("wall_seconds"), **({"cpu_seconds": r["cpu_seconds"]} if "cpu_seconds" in r else {})}


def cmd_plan(args):
    arms = P.arms(args.plan, tuple(args.models))
    print("Interval-width targets (95 % Clopper-Pearson) and the trials they need:")
    for fam, t in P.TARGETS.items():
        if "width" in t:
            print(f"  {fam:8s} rate {100 * t['p']:.0f} % to within {100 * t['width']:.0f} points: n >= {S.trials_for_width(t['p'], t['width'])}"
                  f"  ({t['why']})")
        else:
            print(f"  {fam:8s} {t['why']}")
    total = 0
    print(f"\n{len(arms)} arms, in the order they run:")
    for a in arms:
        total += a.n
        print(f"  {a.name:40s} {a.kind:8s} n={a.n:4d}  {a.model} {a.mode} {a.opt} seed {a.seed} {a.point} role {a.role} flips {a.flips}"
              f" bits {a.bits or 'all'}{' one replica' if a.replica else ''}")
    print(f"{total} trials and fault-free resumes in all")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("plan", "run", "publish", "report"))
    ap.add_argument("--plan", choices=("full", "smoke"), default="full")
    ap.add_argument("--dir", default=DEFAULT_DIR, help="study working directory (default out/dp-vs-mp-study)")
    ap.add_argument("--publish", default=DEFAULT_PUBLISH, help="where finished arms' records go (default docs/results/dp-vs-mp-study)")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=("mlp", "cnn"))
    ap.add_argument("--only", nargs="+", default=None, help="run only these arms (names as `plan` prints them)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--build", default="build")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--commit", action="store_true", help="git-commit each finished arm's records")
    ap.add_argument("--live", default=None, help="report: also read the running arms from this study directory")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "dp-vs-mp.md"))
    args = ap.parse_args()
    stop_on_sigterm()
    if args.jobs < 1:
        die("--jobs must be at least 1")
    if args.command == "plan":
        return cmd_plan(args)
    if args.command == "report":
        import report
        return report.main(args)
    arms = P.arms(args.plan, tuple(args.models))
    if args.only:
        names = {a.name for a in arms}
        bad = [o for o in args.only if o not in names]
        if bad:
            die(f"--only: no arm named {', '.join(bad)} (see `plan`)")
        arms = [a for a in arms if a.name in args.only]
    st = Study(args)
    if args.command == "publish":
        return st.publish_all(arms)
    for exe in ("ckpt-train", "ckpt-flip"):
        if not os.access(os.path.join(st.bin, exe), os.X_OK):
            die(f"build {exe} first ({st.bin})")
    try:
        st.run(arms)
    except OSError as e:  # a full disk, a directory gone: one line, not a traceback
        die(f"{e.filename}: {e.strerror}" if e.filename else str(e), 3)
    log("all arms complete")


if __name__ == "__main__":
    main()
