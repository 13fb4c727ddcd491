#!/usr/bin/python3
"""The numeric configuration is recorded and acted on: a checkpoint's /meta config and every
summary name it; resume and eval of a checkpoint computed under another configuration say so in
one line and record their own; a bad record is corrupt input; a campaign whose trials compute under
another configuration than its golden run stops with exit 7 after restoring the checkpoint, unless
"allow_numeric_mismatch" is set.

usage: numeric_config.py CKPT_TRAIN CKPT_FLIP WORKDIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py

CT, FLIP, WORK = sys.argv[1:4]
DATA = "/usr/share/datasets/fashion-mnist"
ID = "cpu-fma-seqk-1"
NOTE = "ckpt-train: note: the checkpoint was computed under numeric configuration"


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def run(cmd, code=0):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != code:
        fail(f"exit {p.returncode} (expected {code}): {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p


def config(path):
    with h5py.File(path, "r") as f:
        c = f["meta"].attrs["config"]
    return json.loads(c.decode() if isinstance(c, bytes) else c)


def set_config(path, cfg):
    with h5py.File(path, "r+") as f:
        f["meta"].attrs["config"] = json.dumps(cfg)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
w = lambda *p: os.path.join(WORK, *p)  # noqa: E731

# Training records the configuration in the checkpoint and the summary.
run([CT, "train", "--model", "mlp", "--seed", "3", "--limit", "512", "--test-limit", "200", "--epochs", "1", "--data", DATA,
     "--ckpt-dir", w("a"), "--summary", w("a.json")])
s = json.load(open(w("a.json")))
ck = s["last_checkpoint"]
if s["numeric"]["id"] != ID or not s["numeric"]["detail"]:
    fail(f"summary numeric {s['numeric']}")
if config(ck)["numeric"]["id"] != ID:
    fail(f"/meta config numeric {config(ck).get('numeric')}")
print("ok: train records", s["numeric"])

# The same configuration: no note.
p = run([CT, "eval", "--from", ck, "--summary", w("eval_a.json")])
if NOTE in p.stderr:
    fail("eval under the same configuration printed the note: " + p.stderr)

# A checkpoint written before the configuration was recorded (OpenBLAS): one note line, then the run.
old = w("old.h5")
shutil.copy(ck, old)
shutil.copy(ck + ".done", old + ".done")
cfg = config(old)
del cfg["numeric"]
cfg["blas"] = "openblas"
set_config(old, cfg)
p = run([CT, "eval", "--from", old, "--summary", w("eval_old.json")])
notes = [line for line in p.stderr.splitlines() if line.startswith(NOTE)]
if len(notes) != 1 or "blas-openblas" not in notes[0] or ID not in notes[0] or len(p.stderr.strip().splitlines()) != 1:
    fail("eval of an OpenBLAS-era checkpoint: stderr " + repr(p.stderr))
if json.load(open(w("eval_old.json")))["test_accuracy"] != json.load(open(w("eval_a.json")))["test_accuracy"]:
    fail("the note changed the evaluation")
print("ok: eval says:", notes[0])
p = run([CT, "resume", "--from", old, "--epochs", "2", "--ckpt-dir", w("r"), "--summary", w("r.json")])
if sum(line.startswith(NOTE) for line in p.stderr.splitlines()) != 1:
    fail("resume of an OpenBLAS-era checkpoint: stderr " + repr(p.stderr))
r = json.load(open(w("r.json")))
if r["numeric"]["id"] != ID or config(r["last_checkpoint"])["numeric"]["id"] != ID:
    fail("the resumed run does not record its own configuration")
print("ok: resume says the note once and records", ID)

# A damaged record is corrupt input naming the field.
bad = w("bad.h5")
shutil.copy(ck, bad)
shutil.copy(ck + ".done", bad + ".done")
cfg = config(bad)
cfg["numeric"] = 5
set_config(bad, cfg)
p = run([CT, "eval", "--from", bad], 4)
if "numeric" not in p.stderr:
    fail("a damaged numeric record: " + p.stderr)
print("ok: a damaged record is exit 4:", p.stderr.strip())

# Campaigns: a golden summary from another configuration stops the campaign at the first trial.
golden = json.load(open(w("eval_a.json")))
golden["numeric"] = {"id": "cuda-sm90-cudart13000", "detail": "cuBLAS"}
json.dump(golden, open(w("golden_cuda.json"), "w"))
before = sha(ck)


def campaign(name, extra):
    c = {"name": name, "checkpoint": ck, "command": [CT, "eval", "--from", "{ckpt}", "--summary", "{out}"], "trials": 3, "seed": 1,
         "timeout_s": 120, "inject": {"flips": 1, "role": "model"}, "metric": "test_accuracy",
         "golden": {"summary": w("golden_cuda.json")}, **extra}
    json.dump(c, open(w(name + ".json"), "w"))
    return [FLIP, "campaign", w(name + ".json"), "--out", w("out_" + name), "--jobs", "1"]


p = run(campaign("mismatch", {}), 7)
lines = p.stderr.strip().splitlines()
if len(lines) != 1 or "numeric configuration " + ID not in lines[0] or "cuda-sm90-cudart13000" not in lines[0] \
        or "allow_numeric_mismatch" not in lines[0]:
    fail("campaign against a golden of another configuration: " + repr(p.stderr))
if sha(ck) != before:
    fail("the golden checkpoint changed")
print("ok: the campaign stops:", lines[0])
run(campaign("allowed", {"allow_numeric_mismatch": True}))
recs = []
for root, _, files in os.walk(w("out_allowed")):
    for f in files:
        if f.endswith(".jsonl") and "results" in root:
            recs += [json.loads(x) for x in open(os.path.join(root, f)) if x.strip()]
if len(recs) != 3 or any(x.get("numeric") != ID for x in recs):
    fail(f"allowed campaign records: {[x.get('numeric') for x in recs]}")
print("ok: allow_numeric_mismatch classifies the 3 trials and records", ID, "in each")
p = run([FLIP, "report", w("out_allowed")])
if "numeric configuration cuda-sm90-cudart13000" not in p.stdout:
    fail("the report does not name the golden run's numeric configuration:\n" + p.stdout)
print("ok: the report names the golden run's numeric configuration")
