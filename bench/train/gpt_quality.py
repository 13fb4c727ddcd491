#!/usr/bin/python3
"""The gpt recipe of docs/guide/ckpt-train.md#gpt: a 1.85 M parameter model trained on Debian's
fortunes must end clearly below the split's unigram and bigram baselines, and prints a sample.

  gpt_quality.py CKPT_TRAIN [--threads T] [--dir DIR]

Runs the guide's one-liner (600 steps of 16 windows of 128 bytes, AdamW with warmup and cosine
decay), then `ckpt-train sample`. Prints the three numbers in bits per byte, the CPU and wall time,
and exits 1 unless the validation loss is at least 0.5 bits per byte below the bigram baseline.
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("ckpt_train")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--dir", default="gpt_quality")
a = ap.parse_args()

RECIPE = ["--model", "gpt", "--layers", "4", "--heads", "4", "--width", "192", "--context", "128", "--batch", "16", "--limit", "9600",
          "--epochs", "1", "--lr", "3e-3", "--warmup", "50", "--decay-steps", "550", "--seed", "1"]
shutil.rmtree(a.dir, ignore_errors=True)
t0 = time.time()
p = subprocess.run([a.ckpt_train, "train", *RECIPE, "--threads", str(a.threads), "--ckpt-dir", os.path.join(a.dir, "ckpt"),
                    "--summary", os.path.join(a.dir, "summary.json")], capture_output=True, text=True, check=True)
wall = time.time() - t0
cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
print(p.stdout, end="")
m = re.search(r"unigram ([0-9.]+), bigram ([0-9.]+) bits/byte", p.stdout)
unigram, bigram = float(m.group(1)), float(m.group(2))
s = json.load(open(os.path.join(a.dir, "summary.json")))
sample = subprocess.run([a.ckpt_train, "sample", "--from", s["last_checkpoint"], "--prompt", "The ", "--length", "300", "--seed", "1"],
                        capture_output=True, text=True, check=True).stdout
print(f"sample:\n{sample}")
print(f"gpt_quality: validation {s['test_bpb']:.3f} bits/byte, unigram {unigram:.3f}, bigram {bigram:.3f}; "
      f"{s['steps']} steps, {a.threads} threads, CPU {cpu.ru_utime + cpu.ru_stime:.0f} s, wall {wall:.0f} s")
sys.exit(0 if s["test_bpb"] <= bigram - 0.5 else 1)
