#!/usr/bin/python3
"""ckpt_train_hostile.py --ckpt-train CT --dir W [--mpiexec M] CASE: hostile inputs for ckpt-train:
a damaged /meta, bad or aliased paths, numbers at their limits, wrong data, errors under
MPI. Each case checks the exit code, exactly one stderr line naming the file or option, that the
input checkpoint is unchanged and that nothing was left behind. `prepare` makes the checkpoints the
cases start from (CTest fixture); `list` prints the case names."""
import argparse, hashlib, json, os, re, shutil, signal, subprocess, sys
import h5py, numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt-train", required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--mpiexec")
ap.add_argument("case")
A = ap.parse_args()
CT, W = A.ckpt_train, os.path.abspath(A.dir)
FAST = ["--model", "mlp", "--seed", "7", "--limit", "128", "--test-limit", "100", "--batch", "64"]
BASE = os.path.join(W, "base", "ckpt-step00000002.h5")
MP2 = os.path.join(W, "mp2", "ckpt-step00000002.manifest.json")
# A tiny gpt (4 steps of 16 windows of 16 bytes) alone, and as 2 tp slices and 2 pp stages.
GPT = ["--model", "gpt", "--layers", "2", "--heads", "2", "--width", "32", "--context", "16", "--limit", "64", "--test-limit", "16",
       "--batch", "16", "--seed", "3", "--epochs", "1"]
GPT1 = os.path.join(W, "gpt", "ckpt-step00000004.h5")
GPT_TP = os.path.join(W, "gpt-tp", "ckpt-step00000004.manifest.json")
GPT_PP = os.path.join(W, "gpt-pp", "ckpt-step00000004.manifest.json")


def fast_without(opt):
    return [a for i, a in enumerate(FAST) if not (a == opt or (i > 0 and FAST[i - 1] == opt))]


def run(cmd, timeout=120, cwd=None, max_vm=None):
    """Run in its own process group; a hang (a FIFO opened for writing) is killed and reported.
    `max_vm`: an address-space limit in bytes (RLIMIT_AS), to bound what the command may allocate."""
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (max_vm, max_vm))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, cwd=cwd,
                         preexec_fn=limit if max_vm else None)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return -9, out.decode(errors="replace"), err.decode(errors="replace") + f"\n(killed after {timeout} s)"
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def expect(code, regex, cmd, unchanged=(), absent=(), lines=1, mpi=0, cwd=None, max_vm=None):
    if mpi:
        cmd = [A.mpiexec, "-n", str(mpi)] + cmd
    before = {f: digest(f) for f in unchanged}
    rc, out, err = run(cmd, cwd=cwd, max_vm=max_vm)
    sys.stdout.write(out)
    sys.stderr.write(err)
    errs = [l for l in err.splitlines() if l.strip()]
    ok = True
    if rc != code:
        print(f"FAIL: exit {rc}, expected {code}", file=sys.stderr)
        ok = False
    if not re.search(regex, err):
        print(f"FAIL: stderr does not match /{regex}/", file=sys.stderr)
        ok = False
    if lines is not None and len(errs) != lines:
        print(f"FAIL: {len(errs)} stderr lines, expected {lines}", file=sys.stderr)
        ok = False
    for f, h in before.items():
        if not os.path.exists(f) or digest(f) != h:
            print(f"FAIL: input {f} was modified", file=sys.stderr)
            ok = False
    for f in absent:
        if os.path.lexists(f):
            print(f"FAIL: {f} was left behind", file=sys.stderr)
            ok = False
    return ok


def case_dir(name):
    d = os.path.join(W, "cases", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def copy_ckpt(d, name="in.h5"):
    dst = os.path.join(d, name)
    shutil.copyfile(BASE, dst)
    shutil.copyfile(BASE + ".done", dst + ".done")
    return dst


def set_meta_str(path, attr, raw):
    """Rewrite a /meta string attribute with raw bytes (UTF-8 character set, as resil writes them)."""
    with h5py.File(path, "r+") as f:
        g = f["meta"]
        del g.attrs[attr]
        t = h5py.h5t.C_S1.copy()
        t.set_size(max(len(raw), 1))
        t.set_cset(h5py.h5t.CSET_UTF8)
        a = h5py.h5a.create(g.id, attr.encode(), t, h5py.h5s.create(h5py.h5s.SCALAR))
        a.write(np.array(raw, dtype=f"S{max(len(raw), 1)}"), mtype=t)


def config_of(path):
    with h5py.File(path, "r") as f:
        return json.loads(f["meta"].attrs["config"])


def summary_ok(path, code):
    try:
        s = json.load(open(path))
    except Exception as e:  # noqa: BLE001 - any failure to read it is the finding
        print(f"FAIL: summary {path} unreadable: {e}", file=sys.stderr)
        return False
    if s.get("exit_code") != code:
        print(f"FAIL: summary exit_code {s.get('exit_code')}, expected {code}", file=sys.stderr)
        return False
    return True


# ---------------------------------------------------------------------------------- setup
def prepare():
    shutil.rmtree(W, ignore_errors=True)
    os.makedirs(W)
    rc, _, err = run([CT, "train"] + FAST + ["--epochs", "1", "--ckpt-dir", os.path.dirname(BASE)])
    if rc != 0 or not os.path.exists(BASE):
        sys.exit(f"prepare: training the base checkpoint failed ({rc}): {err}")
    rc, _, err = run([CT, "train"] + GPT + ["--ckpt-dir", os.path.dirname(GPT1)])
    if rc != 0 or not os.path.exists(GPT1):
        sys.exit(f"prepare: training the gpt checkpoint failed ({rc}): {err}")
    if A.mpiexec:
        rc, _, err = run([A.mpiexec, "-n", "2", CT, "train"] + FAST + ["--epochs", "1", "--parallel", "mp", "--ckpt-dir", os.path.dirname(MP2)])
        if rc != 0 or not os.path.exists(MP2):
            sys.exit(f"prepare: training the mp2 checkpoint failed ({rc}): {err}")
        for par, man in (("tp", GPT_TP), ("pp", GPT_PP)):
            rc, _, err = run([A.mpiexec, "-n", "2", CT, "train"] + GPT + ["--parallel", par, "--ckpt-dir", os.path.dirname(man)])
            if rc != 0 or not os.path.exists(man):
                sys.exit(f"prepare: training the gpt {par} checkpoint failed ({rc}): {err}")
    return True


# ---------------------------------------------------------------------------------- 7b: /meta
def meta_config_not_utf8_eval():
    d = case_dir("meta_config_not_utf8_eval")
    ck = copy_ckpt(d)
    set_meta_str(ck, "config", json.dumps(config_of(BASE)).encode().replace(b'"mlp"', b'"ml\xff"'))
    s = os.path.join(d, "s.json")
    return expect(4, r"in\.h5: /meta config .*\\xFF", [CT, "eval", "--from", ck, "--summary", s], unchanged=[ck]) and summary_ok(s, 4)


def meta_config_not_utf8_resume():
    d = case_dir("meta_config_not_utf8_resume")
    ck = copy_ckpt(d)
    set_meta_str(ck, "config", b"\xff\xfe{}")
    s = os.path.join(d, "s.json")
    return expect(4, r"in\.h5: /meta config", [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", os.path.join(d, "out"), "--summary", s],
                  unchanged=[ck], absent=[os.path.join(d, "out")]) and summary_ok(s, 4)


def meta_model_not_utf8_resume():
    d = case_dir("meta_model_not_utf8_resume")
    ck = copy_ckpt(d)
    set_meta_str(ck, "model", b"ml\xff")
    s = os.path.join(d, "s.json")
    # Not the config's model 'mlp': a /meta that disagrees with its own config is corrupt (4).
    return expect(4, r"in\.h5: .*model 'ml\\xFF'", [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", os.path.join(d, "out"), "--summary", s],
                  unchanged=[ck], absent=[os.path.join(d, "out")]) and summary_ok(s, 4)


def meta_config_values():
    """Values no run writes: corrupt input naming the field, not a usage error or a wrapped integer."""
    ok = True
    for field, value, regex in [(("optimizer", "lr"), -1.0, r"optimizer\.lr = -1"), (("model",), "xyz", r"model = \"xyz\""),
                                (("epochs",), 2 ** 32 + 1, r"epochs = 4294967297"), (("threads",), 0, r"threads = 0"),
                                (("optimizer", "momentum"), None, r"optimizer\.momentum = null")]:
        d = case_dir("meta_config_values")
        ck = copy_ckpt(d)
        c = config_of(BASE)
        (c[field[0]] if len(field) == 2 else c)[field[-1]] = value
        set_meta_str(ck, "config", json.dumps(c).encode())
        ok &= expect(4, r"in\.h5: /meta config: " + regex, [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", os.path.join(d, "out")],
                     unchanged=[ck], absent=[os.path.join(d, "out")])
    return ok


def meta_position():
    ok = True
    for attrs, regex in [({"step": -5, "epoch": -1}, r"/meta step -5, epoch -1"), ({"epoch": 2 ** 40}, r"/meta step 2, epoch 1099511627776"),
                         ({"world_size": 0}, r"/meta rank 0 of world_size 0")]:
        d = case_dir("meta_position")
        ck = copy_ckpt(d)
        with h5py.File(ck, "r+") as f:
            for k, v in attrs.items():
                f["meta"].attrs[k] = np.int64(v)
        ok &= expect(4, r"in\.h5: " + regex, [CT, "resume", "--from", ck, "--epochs", "3", "--ckpt-dir", os.path.join(d, "out")], unchanged=[ck])
        ok &= expect(4, r"in\.h5: " + regex, [CT, "eval", "--from", ck], unchanged=[ck])
    return ok


def meta_damaged_hdf5():
    """A damaged /meta object header or a /meta that is a dataset: one line,
    exit 4, in eval and resume (HDF5 printed "infinite loop closing library" and a second line at
    exit, and ckpt-train said 3)."""
    ok = True
    for what in ["damaged", "dataset"]:
        d = case_dir("meta_damaged_hdf5")
        ck = copy_ckpt(d)
        if what == "damaged":
            with h5py.File(ck, "r") as f:
                addr = h5py.h5o.get_info(f["meta"].id).addr
            with open(ck, "r+b") as f:  # the header's size field: past the end of the file
                f.seek(addr + 11)
                f.write(b"\x7e")
        else:
            with h5py.File(ck, "r+") as f:
                del f["meta"]
                f["meta"] = np.zeros(3)
        s = os.path.join(d, "s.json")
        out = os.path.join(d, "out")
        regex = r"in\.h5: /meta cannot be opened as a group"
        ok &= expect(4, regex, [CT, "eval", "--from", ck, "--summary", s], unchanged=[ck]) and summary_ok(s, 4)
        ok &= expect(4, regex, [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", out, "--summary", s], unchanged=[ck], absent=[out])
        ok &= summary_ok(s, 4)
    return ok


def meta_counters():
    """/meta counters no run writes: a step near 2^63 (the optimizer's
    step overflowed: exit 2, an internal message), negative values read into unsigned fields (HDF5
    clamped them to 0), a non-integer step (truncated). Exit 4 naming the file and the field."""
    ok = True
    for attr, value, regex in [("step", np.int64(2 ** 63 - 1), r"/meta step 9223372036854775807 is beyond 2\^53"),
                               ("step", np.uint64(2 ** 64 - 1), r"/meta: attribute 'step' = 18446744073709551615 is beyond"),
                               ("step", np.int64(2 ** 62), r"/meta step 4611686018427387904 is beyond 2\^53"),
                               ("step", 8.5, r"/meta: attribute 'step' is not an integer"),
                               ("data_cursor", np.int64(-64), r"/meta: attribute 'data_cursor' = -64 is negative"),
                               ("seed", np.int64(-1), r"/meta: attribute 'seed' = -1 is negative")]:
        d = case_dir("meta_counters")
        ck = copy_ckpt(d)
        with h5py.File(ck, "r+") as f:
            f["meta"].attrs[attr] = value
        s = os.path.join(d, "s.json")
        out = os.path.join(d, "out")
        ok &= expect(4, r"in\.h5: " + regex, [CT, "resume", "--from", ck, "--epochs", "3", "--ckpt-dir", out, "--summary", s],
                     unchanged=[ck], absent=[out]) and summary_ok(s, 4)
        ok &= expect(4, r"in\.h5: " + regex, [CT, "eval", "--from", ck], unchanged=[ck])
    return ok


def meta_config_strict():
    """Config values no run writes: limits out of the u64 range, a key
    written twice (the last one won: the resume trained at batch 1), a config model that is not the
    /meta model (resume said 7 although no model was asked for; eval evaluated the other model)."""
    ok = True
    text = json.dumps(config_of(BASE), separators=(",", ":"))
    cases = [(text.replace('"limit":128', '"limit":-1'), r"/meta config: limit = -1 is not an integer in 0\.\.18446744073709551615"),
             (text.replace('"limit":128', '"limit":18446744073709551616'), r"/meta config: limit = 1\.8446744073709552e\+19 is not an integer"),
             (text.replace('"test_limit":100', '"test_limit":-1'), r"/meta config: test_limit = -1 is not"),
             (text[:-1] + ',"batch":1}', r"/meta config: key \"batch\" appears twice"),
             (text.replace('"model":"mlp"', '"model":"cnn"'), r"/meta model 'mlp' differs from its config's model 'cnn'"),
             (text.replace('"seed":7', '"seed":8'), r"/meta seed 7 differs from its config's seed 8")]
    for cfg, regex in cases:
        if cfg == text:
            print(f"FAIL: the case for /{regex}/ changed nothing in {text}", file=sys.stderr)
            return False
        d = case_dir("meta_config_strict")
        ck = copy_ckpt(d)
        set_meta_str(ck, "config", cfg.encode())
        out = os.path.join(d, "out")
        ok &= expect(4, r"in\.h5: " + regex, [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", out], unchanged=[ck], absent=[out])
        ok &= expect(4, r"in\.h5: " + regex, [CT, "eval", "--from", ck], unchanged=[ck])
    d = case_dir("meta_config_strict")
    ck = copy_ckpt(d)
    set_meta_str(ck, "model", b"cnn")  # the reverse: evaluated as mlp, exit 0
    ok &= expect(4, r"in\.h5: /meta model 'cnn' differs from its config's model 'mlp'", [CT, "eval", "--from", ck], unchanged=[ck])
    return ok


def meta_config_gpt_layers():
    """A gpt whose /meta config says fewer blocks than its /model holds: every block it names fits,
    so resume and eval read them and dropped the others unseen (the model a flip study evaluates is
    not the one in the file); corrupt input naming the first dataset beyond the configuration."""
    d = case_dir("meta_config_gpt_layers")
    rc, _, err = run([CT, "train", "--model", "gpt", "--seed", "7", "--epochs", "1", "--limit", "8", "--test-limit", "4", "--batch", "4",
                      "--layers", "2", "--heads", "2", "--width", "8", "--context", "8", "--ckpt-dir", os.path.join(d, "gpt")])
    ck = os.path.join(d, "gpt", "ckpt-step00000002.h5")
    if rc != 0 or not os.path.exists(ck):
        print(f"FAIL: training the gpt checkpoint failed ({rc}): {err}", file=sys.stderr)
        return False
    c = config_of(ck)
    if c["gpt"]["layers"] != 2:
        print(f"FAIL: the gpt checkpoint's config is not the one trained: {c}", file=sys.stderr)
        return False
    c["gpt"]["layers"] = 1
    set_meta_str(ck, "config", json.dumps(c).encode())
    out = os.path.join(d, "out")
    regex = r"ckpt-step00000002\.h5: dataset /model/h\.1\.\S+ is not a parameter of the model its /meta configuration describes"
    return (expect(4, regex, [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", out], unchanged=[ck], absent=[out]) and
            expect(4, regex, [CT, "eval", "--from", ck], unchanged=[ck]))


def mpi_manifest_values():
    """A manifest newer than this resil, or naming another model than its shards: eval and resume
    exit 4 naming the manifest."""
    ok = True
    src = os.path.dirname(MP2)
    for what, regex in [("version", r"format version 99 is newer than this resil reads"),
                        ("model", r"the manifest's model 'cnn' differs from its shard .*rank-0\.h5 \('mlp'\)")]:
        d = case_dir("mpi_manifest_values")
        mp = os.path.join(d, "mp")
        shutil.copytree(src, mp)
        man = os.path.join(mp, os.path.basename(MP2))
        m = json.load(open(man))
        if what == "version":
            m["format_version"] = 99
        else:
            m["model"] = "cnn"
        json.dump(m, open(man, "w"))
        out = os.path.join(d, "out")
        ok &= expect(4, r"\.manifest\.json: .*" + regex, [CT, "eval", "--from", man], unchanged=[man])
        ok &= expect(4, r"\.manifest\.json: .*" + regex, [CT, "resume", "--from", man, "--epochs", "2", "--ckpt-dir", out], mpi=2,
                     unchanged=[man], absent=[out])
    # One rank's shard truncated: every rank stops, and rank 0, whose shard was fine, made no
    # --ckpt-dir (it made an empty one: the directories were made in the same agreed step as the loads).
    d = case_dir("mpi_manifest_values")
    mp = os.path.join(d, "mp")
    shutil.copytree(src, mp)
    man = os.path.join(mp, os.path.basename(MP2))
    shard = os.path.join(mp, json.load(open(man))["shards"][1])
    with open(shard, "r+b") as f:
        f.truncate(5000)
    out = os.path.join(d, "out")
    ok &= expect(4, r"rank-1\.h5", [CT, "resume", "--from", man, "--epochs", "2", "--ckpt-dir", out], mpi=2, unchanged=[man, shard], absent=[out])
    return ok


# ---------------------------------------------------------------------------------- 10b: paths
def train_cmd(d, *extra):
    return [CT, "train"] + FAST + ["--epochs", "1"] + list(extra)


def ckpt_dir_bad():
    d = case_dir("ckpt_dir_bad")
    f = os.path.join(d, "file")
    open(f, "w").write("x")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    ok = expect(3, r"--ckpt-dir .*file/sub: cannot create: .*file is not a directory", train_cmd(d, "--ckpt-dir", f + "/sub"))
    ok &= expect(3, r"--ckpt-dir .*file: exists and is not a directory", train_cmd(d, "--ckpt-dir", f))
    ok &= expect(3, r"--ckpt-dir .*fifo: exists and is not a directory", train_cmd(d, "--ckpt-dir", fifo))
    ok &= expect(2, r"--ckpt-dir: empty path", train_cmd(d, "--ckpt-dir", ""))
    ok &= expect(3, r"--ckpt-dir /proc/.*cannot", train_cmd(d, "--ckpt-dir", "/proc/self/nonexistent/ck"))
    ok &= expect(3, r"--ckpt-dir .*file/sub", [CT, "latest", "--ckpt-dir", f + "/sub"])
    ok &= expect(2, r"--ckpt-dir: empty path", [CT, "latest", "--ckpt-dir", ""])
    return ok


def output_files_bad():
    """--metrics/--summary that cannot work are refused before training: no checkpoint is written."""
    d = case_dir("output_files_bad")
    f = os.path.join(d, "file")
    open(f, "w").write("x")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    ck = os.path.join(d, "ck")
    ok = True
    for opt in ["--metrics", "--summary"]:
        ok &= expect(3, rf"{opt} .*file/m: cannot create: .*file is not a directory", train_cmd(d, "--ckpt-dir", ck, opt, f + "/m"), absent=[ck])
        ok &= expect(3, rf"{opt} /proc/self/nodir/m: cannot write in /proc/self", train_cmd(d, "--ckpt-dir", ck, opt, "/proc/self/nodir/m"),
                     absent=[ck])
        ok &= expect(3, rf"{opt} .*: is a directory", train_cmd(d, "--ckpt-dir", ck, opt, d), absent=[ck])
        ok &= expect(3, rf"{opt} .*fifo: is not a regular file", train_cmd(d, "--ckpt-dir", ck, opt, fifo), absent=[ck])
        ok &= expect(2, rf"{opt}: empty path", train_cmd(d, "--ckpt-dir", ck, opt, ""), absent=[ck])
    if not os.path.exists(fifo) or not os.path.stat.S_ISFIFO(os.stat(fifo).st_mode):
        print("FAIL: the FIFO was replaced", file=sys.stderr)
        ok = False
    ok &= expect(3, r"--summary .*fifo: is not a regular file", [CT, "eval", "--from", BASE, "--summary", fifo])
    if os.geteuid() != 0:  # root writes anywhere: the permission case needs an ordinary user
        ro = os.path.join(d, "ro")
        os.makedirs(ro)
        os.chmod(ro, 0o555)
        ok &= expect(3, r"--ckpt-dir .*ro/ck: cannot write in .*ro", train_cmd(d, "--ckpt-dir", os.path.join(ro, "ck")))
        ok &= expect(3, r"--summary .*ro/s.json: cannot write in", train_cmd(d, "--ckpt-dir", ck, "--summary", os.path.join(ro, "s.json")), absent=[ck])
    return ok


def outputs_alias_inputs():
    """An output naming the checkpoint being read (or a link to it, or its commit marker) is refused
    and the checkpoint stays as it was."""
    d = case_dir("outputs_alias_inputs")
    ck = copy_ckpt(d)
    link = os.path.join(d, "link.h5")
    os.symlink(ck, link)
    out = os.path.join(d, "out")
    ok = True
    for opt, path in [("--summary", ck), ("--summary", link), ("--metrics", ck), ("--metrics", ck + ".done")]:
        ok &= expect(2, rf"{opt} .* is the input .*\(--from\): it would be overwritten",
                     [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", out, opt, path], unchanged=[ck, ck + ".done"], absent=[out])
    ok &= expect(2, r"--summary .*link\.h5 is the input", [CT, "eval", "--from", ck, "--summary", link], unchanged=[ck])
    ok &= expect(2, r"--summary .*in\.h5 is the input .*link\.h5", [CT, "eval", "--from", link, "--summary", ck], unchanged=[ck])
    ok &= expect(3, r"--ckpt-dir .*in\.h5: exists and is not a directory", [CT, "resume", "--from", ck, "--epochs", "2", "--ckpt-dir", ck],
                 unchanged=[ck])
    return ok


def outputs_alias_each_other():
    d = case_dir("outputs_alias_each_other")
    ck = os.path.join(d, "ck")
    m = os.path.join(d, "m.json")
    ok = expect(2, r"--metrics .*m\.json and --summary .*m\.json name the same file", train_cmd(d, "--ckpt-dir", ck, "--metrics", m, "--summary", m),
                absent=[ck, m])
    ok &= expect(2, r"--ckpt-dir .* and --summary .* name the same file", train_cmd(d, "--ckpt-dir", ck, "--summary", ck), absent=[ck])
    ok &= expect(2, r"--summary .*ckpt-step00000002\.h5: a checkpoint's name inside --ckpt-dir",
                 train_cmd(d, "--ckpt-dir", ck, "--summary", os.path.join(ck, "ckpt-step00000002.h5")), absent=[ck])
    # The same file through a link that exists already.
    open(m, "w").write("")
    os.symlink(m, os.path.join(d, "s.json"))
    ok &= expect(2, r"name the same file", train_cmd(d, "--ckpt-dir", ck, "--metrics", m, "--summary", os.path.join(d, "s.json")), absent=[ck])
    # Two spellings of a file that does not exist yet, relative to the working directory ("x" and
    # "./x" compared unequal, and the checkpoint written later replaced the summary).
    ok &= expect(2, r"--metrics n\.json and --summary \./n\.json name the same file",
                 train_cmd(d, "--ckpt-dir", "ck2", "--metrics", "n.json", "--summary", "./n.json"), absent=[os.path.join(d, "ck2")], cwd=d)
    ok &= expect(2, r"--summary \./ck2/ckpt-step00000002\.h5: a checkpoint's name inside --ckpt-dir ck2",
                 train_cmd(d, "--ckpt-dir", "ck2", "--summary", "./ck2/ckpt-step00000002.h5"), absent=[os.path.join(d, "ck2")], cwd=d)
    # Anything inside a checkpoint's directory (an mp checkpoint's ckpt-stepN/ holds its shards).
    ok &= expect(2, r"--summary .*ckpt-step00000002/rank-0\.h5: a checkpoint's name inside --ckpt-dir",
                 train_cmd(d, "--ckpt-dir", ck, "--summary", os.path.join(ck, "ckpt-step00000002", "rank-0.h5")), absent=[ck])
    # A dangling link to the other output (the metrics were written through it, then the summary
    # replaced them): relative and absolute targets, and a chain of two links.
    os.symlink("t.json", os.path.join(d, "dl"))
    os.symlink(os.path.join(d, "dl"), os.path.join(d, "dl2"))
    for link in ["dl", "dl2"]:
        ok &= expect(2, r"name the same file", train_cmd(d, "--ckpt-dir", ck, "--metrics", os.path.join(d, link), "--summary", os.path.join(d, "t.json")),
                     absent=[ck, os.path.join(d, "t.json")])
    # A link loop, and a dangling link into a missing directory: refused before training (the run
    # trained, wrote its checkpoints and a summary, then could not open the metrics).
    os.symlink("loop", os.path.join(d, "loop"))
    os.symlink(os.path.join(d, "missing", "m.jsonl"), os.path.join(d, "dm"))
    ok &= expect(3, r"--metrics .*loop: a loop of symbolic links", train_cmd(d, "--ckpt-dir", ck, "--metrics", os.path.join(d, "loop"),
                 "--summary", os.path.join(d, "u.json")), absent=[ck, os.path.join(d, "u.json")])
    ok &= expect(3, r"--metrics .*dm: a symbolic link to .*missing/m\.jsonl, whose directory does not exist", train_cmd(d, "--ckpt-dir", ck, "--metrics", os.path.join(d, "dm"),
                 "--summary", os.path.join(d, "u.json")), absent=[ck, os.path.join(d, "u.json")])
    return ok


def from_missing():
    """A missing or unreadable --from is exit 3 (io, docs/reference/exit-codes.md), one line naming the option."""
    d = case_dir("from_missing")
    ok = expect(3, r"^ckpt-train: error: --from .*missing\.h5: no such file", [CT, "eval", "--from", os.path.join(d, "missing.h5")])
    ok &= expect(3, r"^ckpt-train: error: --from .*missing\.h5: no such file",
                 [CT, "resume", "--from", os.path.join(d, "missing.h5"), "--epochs", "2", "--ckpt-dir", os.path.join(d, "out")], absent=[os.path.join(d, "out")])
    ok &= expect(3, r"^ckpt-train: error: --from .*: is a directory", [CT, "eval", "--from", d])
    return ok


def data_path_not_utf8():
    """A --data path that is not UTF-8 cannot be stored in the JSON config: refused before training."""
    d = case_dir("data_path_not_utf8").encode()
    data = os.path.join(d, b"data\xff")
    os.makedirs(data)
    for f in os.listdir(b"/usr/share/datasets/fashion-mnist"):
        os.symlink(os.path.join(b"/usr/share/datasets/fashion-mnist", f), os.path.join(data, f))
    ck = os.path.join(d, b"ck")
    return expect(2, r"--data .*data\\xFF: the path is not valid UTF-8", [CT.encode(), b"train"] + [a.encode() for a in FAST] +
                  [b"--epochs", b"1", b"--data", data, b"--ckpt-dir", ck], absent=[ck])


# ---------------------------------------------------------------------------------- 9b: numbers
def numbers_at_limits():
    d = case_dir("numbers_at_limits")
    ck = os.path.join(d, "ck")
    ok = True
    bad = [("--seed", "-1"), ("--seed", "18446744073709551616"), ("--seed", "99999999999999999999999"), ("--seed", "0x10"), ("--seed", "1.5"),
           ("--lr", "nan"), ("--lr", "inf"), ("--lr", "1e40"), ("--lr", "1e-50"), ("--lr", "-1"), ("--momentum", "nan"),
           ("--weight-decay", "nan"), ("--weight-decay", "-0.5"), ("--lr-decay", "nan"), ("--lr-decay", "0"), ("--limit", "-1"),
           ("--limit", "99999999999999999999"), ("--test-limit", "-1"), ("--batch", "0"), ("--batch", "2.5"), ("--threads", "0"),
           ("--synthetic-samples", "0"), ("--ckpt-every", "-1"), ("--micro-batches", "0")]
    for opt, v in bad:
        args = fast_without(opt)
        ok &= expect(2, rf"^ckpt-train: error: {opt}: '{re.escape(v)}' is not a (decimal integer|number) in",
                     [CT, "train"] + args + ["--epochs", "1", "--ckpt-dir", ck, opt, v], absent=[ck])
    ok &= expect(2, r"--epochs: '0' is not", [CT, "resume", "--from", BASE, "--ckpt-dir", ck, "--epochs", "0"], absent=[ck])
    ok &= expect(2, r"--test-limit: '-3' is not", [CT, "eval", "--from", BASE, "--test-limit", "-3"])
    # Leading zeros are decimal, not octal: --seed 010 is seed 10.
    ok &= expect(0, r"^$", [CT, "train"] + [a if a != "7" else "010" for a in FAST] + ["--epochs", "1", "--ckpt-dir", ck], lines=0)
    with h5py.File(os.path.join(ck, "ckpt-step00000002.h5"), "r") as f:
        if int(f["meta"].attrs["seed"]) != 10:
            print(f"FAIL: --seed 010 stored as {int(f['meta'].attrs['seed'])}", file=sys.stderr)
            ok = False
    return ok


# ---------------------------------------------------------------------------------- data
def data_bad():
    d = case_dir("data_bad")
    ck = os.path.join(d, "ck")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    empty = os.path.join(d, "empty.tsv")
    open(empty, "w").close()
    magic = os.path.join(d, "magic")
    shutil.copytree("/usr/share/datasets/fashion-mnist", magic)
    with open(os.path.join(magic, "t10k-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(b"\x1f\x8b" + b"not gzip at all")
    dl = [CT, "train", "--model", "dlrm", "--epochs", "1", "--seed", "1", "--limit", "128", "--test-limit", "100", "--ckpt-dir", ck]
    ok = expect(3, r"fifo: not a regular file", dl + ["--data", fifo], absent=[ck])
    ok &= expect(3, r"data_bad: not a regular file", dl + ["--data", d], absent=[ck])
    ok &= expect(4, r"empty\.tsv: no samples", dl + ["--data", empty], absent=[ck])
    ok &= expect(3, r"nodir: neither", train_cmd(d, "--ckpt-dir", ck, "--data", os.path.join(d, "nodir")), absent=[ck])
    ok &= expect(4, r"t10k-labels-idx1-ubyte\.gz", train_cmd(d, "--ckpt-dir", ck, "--data", magic), absent=[ck])
    return ok


def data_header_claims():
    """An IDX header claiming 2,000,000 images in a 7.8 KB file fails fast
    with exit 4 naming the file within a 1 GiB address space (it allocated and zeroed 1.5 GB; with
    less memory: exit 1 "out of memory", no file named, no summary). Out of memory while loading is
    one line naming what was loaded, and the summary is written."""
    import gzip, struct
    d = case_dir("data_header_claims")
    claim = os.path.join(d, "claim")
    shutil.copytree("/usr/share/datasets/fashion-mnist", claim)
    with open(os.path.join(claim, "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gzip.compress(struct.pack(">IIII", 0x0803, 2000000, 28, 28) + b"\0" * 7840))
    ck = os.path.join(d, "ck")
    s = os.path.join(d, "s.json")
    gib = 1 << 30
    ok = expect(4, r"claim/train-images-idx3-ubyte\.gz: truncated IDX payload: expected 1568000000 bytes",
                [CT, "train"] + fast_without("--limit") + ["--epochs", "1", "--ckpt-dir", ck, "--data", claim, "--summary", s], absent=[ck],
                max_vm=gib) and summary_ok(s, 4)
    # 2^30 synthetic clicks (the documented maximum) need ~170 GB: refused by the allocator.
    ok &= expect(3, r"^ckpt-train: error: --synthetic-samples 1073741824 \(synthetic clicks\): out of memory",
                 [CT, "train", "--model", "dlrm", "--epochs", "1", "--seed", "1", "--synthetic-samples", "1073741824", "--ckpt-dir", ck,
                  "--summary", s], absent=[ck], max_vm=2 * gib) and summary_ok(s, 3)
    return ok


def data_messages():
    """Messages: the IDX type byte in hexadecimal (0x0D, not "0x13"), and a NUL byte in a Criteo
    field does not end the error line and the summary there."""
    import gzip, struct
    d = case_dir("data_messages")
    ft = os.path.join(d, "floattype")
    shutil.copytree("/usr/share/datasets/fashion-mnist", ft)
    with open(os.path.join(ft, "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gzip.compress(struct.pack(">IIII", 0x0D03, 2, 28, 28) + b"\0" * (2 * 784)))
    ck = os.path.join(d, "ck")
    ok = expect(4, r"train-images-idx3-ubyte\.gz: unsupported IDX element type 0x0D at byte 2", train_cmd(d, "--ckpt-dir", ck, "--data", ft),
                absent=[ck])
    nul = os.path.join(d, "nul.tsv")
    with open(nul, "wb") as f:
        f.write(b"0\x001" + b"\t1" * 13 + b"\t0a" * 26 + b"\n")
    s = os.path.join(d, "s.json")
    ok &= expect(4, r"nul\.tsv:1: field 1: label '0\\x001' is not 0 or 1$",
                 [CT, "train", "--model", "dlrm", "--epochs", "1", "--seed", "1", "--data", nul, "--ckpt-dir", ck, "--summary", s], absent=[ck])
    ok &= summary_ok(s, 4)
    if ok and not json.load(open(s))["error"].endswith("is not 0 or 1"):
        print("FAIL: the summary's error is cut", file=sys.stderr)
        ok = False
    return ok


# ---------------------------------------------------------------------------------- 10c: MPI
def gpt_config_refused():
    """gpt configurations refused before anything is written (exit 2, one line): a --batch the pipeline's
    micro-batches do not divide, and a model whose activations alone exceed the memory (parameters and
    optimizer state would fit: 1 layer of width 2048, but 4096 windows of 64 positions)."""
    d = case_dir("gpt_config_refused")
    ck, m = os.path.join(d, "ck"), os.path.join(d, "m.jsonl")
    ok = expect(2, r"^ckpt-train: error: --batch 16 is not divisible by --micro-batches 3$",
                [CT, "train"] + GPT + ["--parallel", "pp", "--micro-batches", "3", "--ckpt-dir", ck, "--metrics", m], absent=[ck, m])
    big = ["--model", "gpt", "--layers", "1", "--heads", "1", "--width", "2048", "--context", "64", "--batch", "4096", "--limit", "4096",
           "--test-limit", "16", "--epochs", "1", "--seed", "1"]
    ok &= expect(2, r"^ckpt-train: error: the gpt of --layers 1 .* needs about [0-9.]+ GiB per rank \(parameters, gradients and optimizer state 0\.[0-9] GiB, "
                    r"activations [0-9.]+ GiB, attention scores [0-9.]+ GiB\), more than the",
                 [CT, "train"] + big + ["--ckpt-dir", ck, "--metrics", m], absent=[ck, m])
    return ok


def gpt_sample_nonfinite():
    """sample from a gpt whose weights hold a NaN: exit 6, one line, as eval (not bytes drawn from NaN)."""
    d = case_dir("gpt_sample_nonfinite")
    ck = os.path.join(d, "in.h5")
    shutil.copyfile(GPT1, ck)
    shutil.copyfile(GPT1 + ".done", ck + ".done")
    with h5py.File(ck, "r+") as f:
        ds = f["/model/h.0.attn.c_attn.weight"]
        a = ds[()]
        a[0, 0] = np.nan
        ds[...] = a
    return (expect(6, r"^ckpt-train: error: .*in\.h5: NaN/Inf in the next-byte logits at byte 1", [CT, "sample", "--from", ck, "--length", "20"],
                   unchanged=[ck]) and
            expect(6, r"NaN/Inf", [CT, "eval", "--from", ck], unchanged=[ck]))


def gpt_shards_copy(d, man, name):
    src = os.path.dirname(man)
    dst = os.path.join(d, name)
    shutil.copytree(src, dst)
    return os.path.join(dst, os.path.basename(man))


def set_element(path, ds, value, index=0):
    with h5py.File(path, "r+") as f:
        x = f[ds]
        a = x[()]
        a.flat[index] = value
        x[...] = a


def mpi_gpt_shards():
    """tp and pp manifests whose shards disagree. A NaN in rank 1's copy of an unsliced tp parameter:
    resume ends with exit 6 on every rank (the ranks' losses differ; none may wait in the clip's
    collective). eval and sample, one process putting the shards together, refuse a tensor whose
    copies differ (tp: ln_f.weight; pp: the tied embedding of the last stage) with exit 7 naming both
    files, and tp slices that overlap with exit 4."""
    d = case_dir("mpi_gpt_shards")
    ok = True
    tp = gpt_shards_copy(d, GPT_TP, "tp-nan")
    shard1 = os.path.join(os.path.dirname(tp), "ckpt-step00000004", "rank-1.h5")
    set_element(shard1, "/model/ln_f.weight", np.nan)
    out = os.path.join(d, "tp-out")
    ok &= expect(6, r"NaN/Inf in the training loss at step 5", [CT, "resume", "--from", tp, "--epochs", "2", "--ckpt-dir", out], mpi=2,
                 unchanged=[shard1], lines=None)
    ok &= expect(7, r"^ckpt-train: error: .*rank-1\.h5: /model/ln_f\.weight differs from its copy in .*rank-0\.h5: one process cannot compute with both",
                 [CT, "eval", "--from", tp], unchanged=[shard1])
    pp = gpt_shards_copy(d, GPT_PP, "pp-wte")
    last = os.path.join(os.path.dirname(pp), "ckpt-step00000004", "rank-1.h5")
    set_element(last, "/model/wte.weight", 1.0e3, index=5)
    for cmd in (["eval", "--from", pp], ["sample", "--from", pp, "--length", "8"]):
        ok &= expect(7, r"^ckpt-train: error: .*rank-1\.h5: /model/wte\.weight differs from its copy in .*rank-0\.h5", [CT] + cmd, unchanged=[last])
    # rank 1's slice of a sliced tensor made rank 0's: half of the global tensor would stay zero.
    ov = gpt_shards_copy(d, GPT_TP, "tp-overlap")
    r0, r1 = (os.path.join(os.path.dirname(ov), "ckpt-step00000004", f"rank-{r}.h5") for r in (0, 1))
    name = "h.0.attn.c_attn.bias"
    with h5py.File(r0, "r") as f:  # the attribute as resil wrote it: its value and its string type
        sl = f["/model/" + name].attrs["resil_tp_slice"]
        dt = f["/model/" + name].attrs.get_id("resil_tp_slice").dtype
    with h5py.File(r1, "r+") as f:
        for ds in ["/model/" + name] + [f"/optimizer/{name}/{k}" for k in f["/optimizer/" + name]]:
            f[ds].attrs.create("resil_tp_slice", sl, dtype=dt)
    ok &= expect(4, r"^ckpt-train: error: .*manifest\.json: the shards' slices of /model/h\.0\.attn\.c_attn\.bias overlap at index",
                 [CT, "eval", "--from", ov], unchanged=[r1])
    return ok


def mpi_usage_once():
    """Argument and validation errors under mpiexec: one line (rank 0), the documented code."""
    d = case_dir("mpi_usage_once")
    ck = os.path.join(d, "ck")
    f = os.path.join(d, "file")
    open(f, "w").write("x")
    dp = [CT, "train"] + fast_without("--batch") + ["--epochs", "1", "--parallel", "dp"]
    ok = expect(2, r"^ckpt-train: error: --seed: '-1' is not", dp + ["--ckpt-dir", ck, "--batch", "64", "--seed", "-1"], mpi=2, absent=[ck])
    ok &= expect(2, r"^ckpt-train: error: --lr: 'nan' is not", dp + ["--ckpt-dir", ck, "--batch", "64", "--lr", "nan"], mpi=2, absent=[ck])
    ok &= expect(2, r"^ckpt-train: error: .*--bogus", dp + ["--ckpt-dir", ck, "--batch", "64", "--bogus"], mpi=2, absent=[ck])
    ok &= expect(3, r"^ckpt-train: error: --ckpt-dir .*file/x: cannot create", dp + ["--ckpt-dir", f + "/x", "--batch", "64"], mpi=2)
    ok &= expect(2, r"^ckpt-train: error: --batch 63 is not divisible", dp + ["--ckpt-dir", ck, "--batch", "63"], mpi=2, absent=[ck])
    ok &= expect(2, r"^ckpt-train: error: eval runs in one process", [CT, "eval", "--from", BASE], mpi=2)
    ok &= expect(0, r"^$", [CT, "--help"], mpi=2, lines=0)
    return ok


def mpi_one_rank_fails():
    """A failure on one rank only (its shard): printed with its rank, every rank ends, the code of the failure."""
    d = case_dir("mpi_one_rank_fails")
    src = os.path.dirname(MP2)
    ok = True
    for what, code, regex in [("model", 7, r"^ckpt-train: error: rank 1: .*rank-1\.h5: checkpoint holds model 'cnn'"),
                              ("truncate", 4, r"^ckpt-train: error: rank 1: .*rank-1\.h5: cannot open as HDF5")]:
        mp = os.path.join(d, what)
        shutil.copytree(src, mp)
        shard = os.path.join(mp, "ckpt-step00000002", "rank-1.h5")
        if what == "model":
            set_meta_str(shard, "model", b"cnn")
        else:
            os.truncate(shard, 1000)
        out = os.path.join(d, what + "-out")
        ok &= expect(code, regex, [CT, "resume", "--from", os.path.join(mp, os.path.basename(MP2)), "--epochs", "2", "--ckpt-dir", out],
                     mpi=2, unchanged=[shard])
    return ok


def mpi_rank0_alone_aborts():
    """An error outside the agreed checks, on rank 0 only (its metrics file turns into a directory
    mid-run): printed with the rank, MPI_Abort ends every rank with the error's code (no hang)."""
    import threading, time
    d = case_dir("mpi_rank0_alone_aborts")
    m = os.path.join(d, "m.jsonl")

    def swap():  # after the first epoch's record: the next append fails
        for _ in range(24000):
            if os.path.exists(m) and os.path.getsize(m) > 0:
                # Not atomic: an append between remove and mkdir creates the file again; then
                # remove it again (a run of ~1 s on a loaded machine hit that window).
                while True:
                    try:
                        os.remove(m)
                    except FileNotFoundError:
                        pass
                    try:
                        os.mkdir(m)
                        return
                    except FileExistsError:
                        continue
            time.sleep(0.005)

    t = threading.Thread(target=swap)
    t.start()
    ok = expect(3, r"^ckpt-train: error: rank 0: .*m\.jsonl: cannot append metrics",
                [CT, "train"] + fast_without("--limit") + ["--limit", "2048", "--epochs", "20", "--parallel", "dp", "--ckpt-dir",
                                                            os.path.join(d, "ck"), "--metrics", m], mpi=2, lines=None)
    t.join()
    return ok


CASES = {f.__name__: f for f in [meta_config_not_utf8_eval, meta_config_not_utf8_resume, meta_model_not_utf8_resume, meta_config_values,
                                 meta_position, ckpt_dir_bad, output_files_bad, outputs_alias_inputs, outputs_alias_each_other, from_missing,
                                 data_path_not_utf8, numbers_at_limits, data_bad, mpi_usage_once, mpi_one_rank_fails,
                                 mpi_rank0_alone_aborts, meta_damaged_hdf5, meta_counters, meta_config_strict, mpi_manifest_values,
                                 data_header_claims, data_messages, meta_config_gpt_layers, gpt_config_refused, gpt_sample_nonfinite,
                                 mpi_gpt_shards]}

if A.case == "prepare":
    sys.exit(0 if prepare() else 1)
if A.case == "list":
    print(";".join(CASES))
    sys.exit(0)
if A.case.startswith("mpi_") and not A.mpiexec:
    sys.exit(f"{A.case} needs --mpiexec")
sys.exit(0 if CASES[A.case]() else 1)
