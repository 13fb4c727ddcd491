#!/usr/bin/python3
"""ckpt-flip on every pickle torch.save writes: protocols 2 to 5, zip and legacy (non-zip), with
objects outside the tensor subset beside the tensors (argparse.Namespace, numpy scalars and arrays,
numpy's and Python's RNG state as Hugging Face's Trainer saves them in rng_state.pth, a user's
class holding a tensor). Through inspect, inject (-o and in place), replay, diff and revert, with
torch.load as the independent reader: exactly N bits differ over all storages, the other objects
load unchanged, revert is byte-identical, zip CRCs stay valid. A checkpoint holding a pickle that
calls os.system when unpickled is flipped without anything being run. argv: ckpt-flip, scratch dir."""
import argparse, io, json, os, random, shutil, subprocess, sys, zipfile

import numpy as np
import torch

from ckpt_flip_pytest import FLIP, T, fail, flip, sha

INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class Holder:
    """A user's class: pickled by its __dict__ (NEWOBJ + BUILD), holding a tensor."""

    def __init__(self, t):
        self.t, self.note = t, "kept"


def storages(obj):
    """Each storage once (by its data pointer): its whole content as integer words."""
    out, seen = {}, set()

    def walk(prefix, v):
        if isinstance(v, torch.Tensor):
            s = v.storage()
            if s.data_ptr() in seen:
                return
            seen.add(s.data_ptr())
            whole = torch.empty(0, dtype=v.dtype).set_(s)
            out[prefix] = whole.view(INT[whole.element_size()]).numpy().copy()
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}/{k}", x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}/{i}", x)
        elif isinstance(v, (argparse.Namespace, Holder)):
            walk(prefix, vars(v))

    walk("", obj)
    return out


def bits(a, b):
    if a.keys() != b.keys():
        fail(f"storages differ: {sorted(a)} vs {sorted(b)}")
    return sum(int(np.unpackbits((a[k] ^ b[k]).view(np.uint8)).sum()) for k in a)


def others(obj):
    """The values that are not tensors, as comparable Python values."""
    rng = obj["rng"]["numpy"]
    return (vars(obj["args"])["lr"], vars(obj["args"])["name"], float(obj["best_acc"]), int(obj["epoch_np"]), obj["hist"].tolist(),
            rng[0], rng[1].tolist(), rng[2:], obj["rng"]["python"], obj["holder"].note)


torch.manual_seed(0)
np.random.seed(1)
random.seed(2)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 4))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(6, 8)).square().mean().backward()
    opt.step()
world = {"model": net.state_dict(), "optimizer": opt.state_dict(), "args": argparse.Namespace(lr=0.1, name="run", w=torch.randn(5)),
         "best_acc": np.float64(0.93), "epoch_np": np.int64(4), "hist": np.arange(4.0),
         "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()},
         "holder": Holder(torch.randn(3).half())}
base_others = others(world)

for protocol in (2, 4, 5):
    for zipped in (True, False):
        label = f"protocol {protocol} {'zip' if zipped else 'legacy'}"
        ckpt = f"{T}/p{protocol}{'z' if zipped else 'l'}.pt"
        torch.save(world, ckpt, pickle_protocol=protocol, _use_new_zipfile_serialization=zipped)
        original = sha(ckpt)
        base = storages(torch.load(ckpt))
        info = json.loads(flip("inspect", ckpt, "--json").stdout)
        names = {d["dataset"] for d in info["datasets"]}
        for want in ("/model/0.weight", "/optimizer/state/0/exp_avg", "/args/w", "/holder/t", "/rng/cpu"):
            if want not in names:
                fail(f"{label}: inspect lacks {want}: {sorted(names)}")
        total = sum(v.size * v.dtype.itemsize * 8 for v in base.values())
        if int(info["total_bits"]) != total:
            fail(f"{label}: inspect's fault space {info['total_bits']} != the storages' {total} bits")
        out, log = f"{T}/bad.pt", f"{T}/bad.jsonl"
        flip("inject", ckpt, "-o", out, "--seed", "7", "--flips", "20", "--log", log)
        if sha(ckpt) != original:
            fail(f"{label}: inject -o changed its input")
        got = torch.load(out)
        if bits(base, storages(got)) != 20:
            fail(f"{label}: {bits(base, storages(got))} bits differ, expected 20")
        if others(got) != base_others:
            fail(f"{label}: the objects beside the tensors changed")
        if zipped and zipfile.ZipFile(out).testzip() is not None:
            fail(f"{label}: testzip() reports a bad CRC")
        flip("replay", ckpt, "--log", log, "-o", f"{T}/replayed.pt")
        if sha(f"{T}/replayed.pt") != sha(out):
            fail(f"{label}: replay -o is not byte-identical to inject -o")
        d = json.loads(flip("diff", ckpt, out, "--json").stdout)
        if sum(sum(int(c) for c in x["bit_histogram"].values()) for x in d["datasets"]) != 20:
            fail(f"{label}: diff does not count 20 bits")
        flip("revert", out, "--log", log)
        if sha(out) != original:
            fail(f"{label}: revert of -o output is not byte-identical")
        work = f"{T}/work.pt"
        shutil.copy(ckpt, work)
        flip("inject", work, "--in-place", "--seed", "11", "--flips", "33", "--log", f"{T}/inplace.jsonl")
        if bits(base, storages(torch.load(work))) != 33:
            fail(f"{label}: in place: not 33 bits")
        flip("revert", work, "--log", f"{T}/inplace.jsonl")
        if sha(work) != original:
            fail(f"{label}: revert after --in-place is not byte-identical")


# Lightning's layout: --role optimizer selects optimizer_states, --role model state_dict; inspect shows
# each tensor's role and counter flag, and its sampled total is what inject samples by default.
lightning = f"{T}/last.ckpt"
torch.save({"epoch": 1, "global_step": 2, "state_dict": net.state_dict(), "optimizer_states": [opt.state_dict()],
            "lr_schedulers": [], "callbacks": {}}, lightning)
info = json.loads(flip("inspect", lightning, "--json").stdout)
roles = {d["dataset"]: (d["role"], d["counter"], d["sampled"]) for d in info["datasets"]}
for name, (role, counter, sampled) in roles.items():
    want = "model" if name.startswith("/state_dict/") else "optimizer" if name.startswith("/optimizer_states/") else "other"
    is_counter = name.endswith("num_batches_tracked") or name.endswith("/step")
    if role != want or counter != is_counter or sampled == counter:
        fail(f"lightning inspect: {name}: role {role}, counter {counter}, sampled {sampled}")
sampled_bits = sum(int(d["fault_bits"]) for d in info["datasets"] if d["sampled"])
if int(info["sampled_bits"]) != sampled_bits or int(info["sampled_bits"]) >= int(info["total_bits"]) or info["counters"] != 7:
    fail(f"lightning inspect totals: {info['sampled_bits']} sampled, {info['total_bits']} stored, {info['counters']} counters")
for role, prefix in (("optimizer", "/optimizer_states/"), ("model", "/state_dict/")):
    flip("inject", lightning, "-o", f"{T}/role.ckpt", "--seed", "4", "--flips", "30", "--role", role, "--log", f"{T}/role.jsonl")
    recs = [r for r in map(json.loads, open(f"{T}/role.jsonl")) if r["type"] == "flip"]
    if len(recs) != 30 or any(not r["dataset"].startswith(prefix) or r["dataset"].endswith("/step") for r in recs):
        fail(f"--role {role} on a Lightning checkpoint: {[r['dataset'] for r in recs][:5]}")
    os.remove(f"{T}/role.ckpt")
# inject with default filters hits only the tensors inspect says are sampled, and over many flips all of them.
flip("inject", lightning, "-o", f"{T}/many.ckpt", "--seed", "5", "--flips", "5000", "--log", f"{T}/many.jsonl")
sampled = {d for d, (_, _, s) in roles.items() if s}
hit = {r["dataset"] for r in map(json.loads, open(f"{T}/many.jsonl")) if r["type"] == "flip"}
if hit != sampled:
    fail(f"inject's default sample {sorted(hit ^ sampled)} differs from what inspect calls sampled")
p = flip("inject", lightning, "-o", f"{T}/x.ckpt", "--seed", "1", "--flips", "1", "--role", "optimizer", "--include", "*/step",
         "--exclude", "*/step", "--log", f"{T}/x.jsonl", rc=5)
if "--exclude */step removed every tensor left" not in p.stderr:
    fail(f"empty selection message does not name --exclude: {p.stderr!r}")

# A pickle that would run a command when unpickled: ckpt-flip reads it as an opaque value, never runs it.
marker = f"{T}/executed"


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {marker}",))


evil = f"{T}/evil.pt"
torch.save({"w": torch.arange(64, dtype=torch.float32), "evil": Evil()}, evil)  # saving calls nothing
before = zipfile.ZipFile(evil).read("evil/data/0")
flip("inspect", evil)
flip("inject", evil, "-o", f"{T}/evil_bad.pt", "--seed", "1", "--flips", "5", "--log", f"{T}/evil.jsonl")
flip("inject", evil, "--in-place", "--seed", "2", "--flips", "4", "--log", f"{T}/evil2.jsonl")
after = zipfile.ZipFile(f"{T}/evil_bad.pt").read("evil/data/0")
x = np.frombuffer(before, np.uint8) ^ np.frombuffer(after, np.uint8)
if int(np.unpackbits(x).sum()) != 5 or zipfile.ZipFile(f"{T}/evil_bad.pt").testzip() is not None:
    fail("os.system checkpoint: the tensor beside the object is not flipped exactly")
if os.path.exists(marker):
    fail("os.system checkpoint: something was executed")

# Under auto-detection, a bare pickle that is not torch.save's is one line naming the file, exit 4.
bare = f"{T}/bare.pkl"
open(bare, "wb").write(b"\x80\x02}q\x00.")
p = flip("inspect", bare, rc=4)
if len(p.stderr.strip().splitlines()) != 1 or bare not in p.stderr or "torch's magic number" not in p.stderr:
    fail(f"bare pickle: {p.stderr!r}")
print("ok")
