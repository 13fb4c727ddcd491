#!/usr/bin/python3
"""resume --final-only: evaluates, checkpoints and reports only after the last epoch, and ends
bit-identical to a resume that does all three every epoch.

  final_only.py CKPT_TRAIN DIR [MPIEXEC]

For none, and with MPIEXEC dp (a file) and mp (a manifest and its shards) on 2 ranks: train 1
epoch, then resume to epoch 3 twice, with and without --final-only. The final checkpoints match
byte for byte; the summaries match but for the checkpoint path and wall time; the --final-only run
wrote one checkpoint (epoch 3) and one metrics record, the other two of each.

Then (none) a long --final-only resume stopped by SIGTERM: one stopped inside an epoch has evaluated
nothing, so its summary's test_loss and test_accuracy are null (not 0), while final_loss is the last
completed epoch's; one stopped at an epoch's end evaluated that epoch and reports it.
"""
import json, os, shutil, signal, subprocess, sys, time

ct, root = sys.argv[1], sys.argv[2]
mpiexec = sys.argv[3] if len(sys.argv) > 3 else None
here = os.path.dirname(os.path.abspath(__file__))
fails = []


def run(launch, args):
    p = subprocess.run(launch + [ct] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")


def ckpts(d):
    """The checkpoints in d: files, or mp manifests (whose shards lie in the directory of the same stem)."""
    names = [f for f in os.listdir(d) if f.startswith("ckpt-step") and not f.endswith(".done")]
    return sorted(f for f in names if f.endswith(".manifest.json") or (f.endswith(".h5") and os.path.isfile(os.path.join(d, f))))


def tree(path):
    """Every file a checkpoint is: the file, or the manifest and the shards beside it, by relative name."""
    stem = path[:-len(".manifest.json")] if path.endswith(".manifest.json") else None
    files = {os.path.basename(path): path}
    if stem and os.path.isdir(stem):
        for f in os.listdir(stem):
            if not f.endswith(".done"):
                files[os.path.join(os.path.basename(stem), f)] = os.path.join(stem, f)
    return files


modes = [("none", [])] + ([("dp", [mpiexec, "-n", "2"]), ("mp", [mpiexec, "-n", "2"])] if mpiexec else [])
for mode, launch in modes:
    d = os.path.join(root, mode)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    run(launch, ["train", "--model", "mlp", "--parallel", mode, "--seed", "3", "--limit", "512", "--test-limit", "200", "--batch", "64",
                 "--epochs", "1", "--ckpt-dir", f"{d}/t"])
    first = os.path.join(d, "t", ckpts(os.path.join(d, "t"))[0])
    for v, extra in (("every", []), ("final", ["--final-only"])):
        run(launch, ["resume", "--from", first, "--epochs", "3", "--ckpt-dir", f"{d}/{v}", "--summary", f"{d}/{v}.json",
                     "--metrics", f"{d}/{v}.jsonl", "--loss-every", "4", *extra])
    every, final = ckpts(f"{d}/every"), ckpts(f"{d}/final")
    if len(every) != 2 or final != every[-1:]:
        fails.append(f"{mode}: checkpoints {every} and, with --final-only, {final}")
        continue
    r = subprocess.run([sys.executable, os.path.join(here, "compare_ckpt.py"), f"{d}/every/{every[-1]}", f"{d}/final/{final[-1]}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fails.append(f"{mode}: the final checkpoints differ: {r.stdout.strip()} {r.stderr.strip()}")
    te, tf = tree(f"{d}/every/{every[-1]}"), tree(f"{d}/final/{final[-1]}")
    if sorted(te) != sorted(tf) or len(te) != (3 if mode == "mp" else 1):
        fails.append(f"{mode}: the final checkpoints are {sorted(te)} and {sorted(tf)}")
    for rel, path in te.items():
        if rel in tf and open(path, "rb").read() != open(tf[rel], "rb").read():
            fails.append(f"{mode}: {rel} differs in its bytes")
    a, b = json.load(open(f"{d}/every.json")), json.load(open(f"{d}/final.json"))
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if diff != ["last_checkpoint", "wall_seconds"]:
        fails.append(f"{mode}: the summaries differ in {diff}")
    n_every = sum(1 for _ in open(f"{d}/every.jsonl"))
    n_final = sum(1 for _ in open(f"{d}/final.jsonl"))
    if (n_every, n_final) != (2, 1):
        fails.append(f"{mode}: {n_every} and {n_final} metrics records, not 2 and 1")
    elif json.loads(open(f"{d}/final.jsonl").readline())["epoch"] != 3:
        fails.append(f"{mode}: the --final-only metrics record is not epoch 3's")

# A --final-only resume stopped by SIGTERM: 8 steps an epoch (512 samples, batch 64), so most stops
# fall inside an epoch; one at an epoch's end is checked too, then tried again.
d = os.path.join(root, "none")
first = os.path.join(d, "t", ckpts(os.path.join(d, "t"))[0])
inside = False
for attempt in range(4):
    summ = os.path.join(d, f"stopped{attempt}.json")
    p = subprocess.Popen([ct, "resume", "--from", first, "--epochs", "2000", "--final-only", "--ckpt-dir", f"{d}/stopped{attempt}",
                          "--summary", summ], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate()
    if p.returncode != 75:
        fails.append(f"stopped --final-only resume: exit {p.returncode}, not 75 (preempted): {err.strip()}")
        break
    s = json.load(open(summ))
    steps = s.get("steps")
    if not isinstance(steps, int) or steps <= 8 or s.get("preempted") is not True:
        fails.append(f"stopped --final-only resume: summary steps {steps}, preempted {s.get('preempted')}")
        break
    if steps % 8:
        inside = True
        if s.get("test_loss") is not None or s.get("test_accuracy") is not None:
            fails.append(f"stopped inside an epoch (step {steps}) with nothing evaluated, the summary has test_loss "
                         f"{s.get('test_loss')} and test_accuracy {s.get('test_accuracy')}, not null")
        # the resume starts at step 8; its first completed epoch ends at step 16
        if (steps >= 16) != isinstance(s.get("final_loss"), float):
            fails.append(f"stopped at step {steps}: final_loss {s.get('final_loss')}, not the last completed epoch's (null before one)")
        break
    if not isinstance(s.get("test_loss"), float) or not isinstance(s.get("test_accuracy"), float):
        fails.append(f"stopped at the end of an epoch (step {steps}): test_loss {s.get('test_loss')}, "
                     f"test_accuracy {s.get('test_accuracy')}, not that epoch's evaluation")
        break
if not inside and not fails:
    fails.append("four SIGTERMs each stopped the --final-only resume at an epoch's end; none inside one")

if fails:
    print("FAIL:\n" + "\n".join(fails))
    sys.exit(1)
print(f"resume --final-only: {', '.join(m for m, _ in modes)}: the same end, one checkpoint and one metrics record; "
      "stopped inside an epoch, no test metrics")
