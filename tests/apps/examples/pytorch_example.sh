#!/bin/bash
# examples/pytorch/train.py, the trial command of a PyTorch user's campaign, with Debian's
# python3-torch: training is deterministic (same seed and arguments, same checkpoint bytes under any
# file name, same summary), resuming is bit-exact (1 epoch + resume 1 = 2 epochs straight), and a
# bit-flipped or damaged checkpoint ends with the documented exit code, one stderr line and a
# summary JSON saying so: NaN weight 6, truncated file 4, another layout 7, missing file 3.
# Exit 77 (CTest SKIP_RETURN_CODE) only when torch cannot be imported.
. "$(dirname "$0")/../../support/test_lib.sh" pytorch-example
"$PY" -c "import torch" 2> /dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch (python3-torch)"; exit 77; }
TRAIN=("$PY" "$SRC/examples/pytorch/train.py")
SMALL=(--test-limit 200)  # 200 test images; training: 200 images in 4 batches of 50

run "${TRAIN[@]}" --help
grep -q "^examples:" "$T/stdout" || fail "--help has no examples"

# Same seed and arguments, two runs, two file names: identical bytes and summaries.
mkdir -p "$T/a" "$T/b" "$T/r1" "$T/s"
run "${TRAIN[@]}" train --epochs 1 --limit 200 --batch-size 50 --seed 5 "${SMALL[@]}" --save "$T/a/golden.pt" --out "$T/a/golden.json"
grep -q "seed 5" "$T/stdout" || fail "the seed is not printed"
run "${TRAIN[@]}" train --epochs 1 --limit 200 --batch-size 50 --seed 5 "${SMALL[@]}" --save "$T/b/other-name.pt" --out "$T/b/golden.json"
cmp "$T/a/golden.pt" "$T/b/other-name.pt" || fail "two trainings with one seed differ"
GOLDEN_SHA=$(sha256sum < "$T/a/golden.pt")

# A trial: resume to the end of a 2-epoch schedule; then the same schedule in one go, which must
# give the same bytes (so resuming is deterministic too).
run "${TRAIN[@]}" train --from "$T/a/golden.pt" --epochs 2 "${SMALL[@]}" --save "$T/r1/final.pt" --out "$T/r1/trial.json"
run "${TRAIN[@]}" train --epochs 2 --limit 200 --batch-size 50 --seed 5 "${SMALL[@]}" --save "$T/s/final.pt" --out "$T/s/trial.json"
cmp "$T/r1/final.pt" "$T/s/final.pt" || fail "1 epoch + resume 1 differs from 2 epochs straight"
[ "$(sha256sum < "$T/a/golden.pt")" = "$GOLDEN_SHA" ] || fail "resuming modified the checkpoint"

# The damaged checkpoints: one weight set to NaN (what a flipped exponent does), a bare state_dict.
"$PY" - "$T" <<'PYEOF' || fail "making the damaged checkpoints"
import sys, torch
t = sys.argv[1]
ck = torch.load(f"{t}/a/golden.pt")
torch.save(ck["model"], f"{t}/bare.pt")
ck["model"]["conv1.weight"].view(-1)[5] = float("nan")
torch.save(ck, f"{t}/nan.pt")
data = open(f"{t}/a/golden.pt", "rb").read()
open(f"{t}/trunc.pt", "wb").write(data[: len(data) // 2])
PYEOF
mkdir -p "$T/bad"
for f in nan trunc bare; do sha256sum "$T/$f.pt" > "$T/$f.sha"; done
expect_err 6 "loss is nan at step 4" "${TRAIN[@]}" train --from "$T/nan.pt" --epochs 2 "${SMALL[@]}" --save "$T/bad/nan-final.pt" --out "$T/bad/nan.json"
expect_err 6 "model/conv1.weight" "${TRAIN[@]}" eval --from "$T/nan.pt" "${SMALL[@]}" --out "$T/bad/nan-eval.json"
expect_err 4 "torch.load cannot read" "${TRAIN[@]}" train --from "$T/trunc.pt" --epochs 2 "${SMALL[@]}" --save "$T/bad/trunc-final.pt" --out "$T/bad/trunc.json"
expect_err 7 "not a checkpoint of this script" "${TRAIN[@]}" eval --from "$T/bare.pt" --out "$T/bad/bare.json"
expect_err 3 "no such file" "${TRAIN[@]}" eval --from "$T/missing.pt" --out "$T/bad/missing.json"
expect_err 2 "--seed" "${TRAIN[@]}" train --from "$T/a/golden.pt" --seed 1 --out "$T/bad/usage.json"
for f in nan trunc bare; do sha256sum -c --quiet "$T/$f.sha" || fail "$f.pt was modified"; done
[ ! -e "$T/bad/usage.json" ] || fail "a usage error wrote a summary"
ls -A "$T/bad" | grep -v -x -e nan.json -e nan-eval.json -e trunc.json -e bare.json -e missing.json \
  && fail "a failed run left a checkpoint or a temporary file"

"$PY" - "$T" <<'PYEOF' || fail "summaries"
import json, sys
t = sys.argv[1]
def load(p):
    with open(f"{t}/{p}") as f:
        return json.load(f)
g, b, r1, s = load("a/golden.json"), load("b/golden.json"), load("r1/trial.json"), load("s/trial.json")
same = lambda j: {k: v for k, v in j.items() if k not in ("wall_seconds", "last_checkpoint")}
assert same(g) == same(b), ("two trainings' summaries differ", g, b)
assert g["test_accuracy"] is not None and g["exit_code"] == 0 and g["epochs_trained"] == 1, g
for k in ("test_accuracy", "test_loss", "final_loss", "steps", "seed"):
    assert r1[k] == s[k], (k, r1[k], s[k])
assert (r1["exit_code"], r1["nan_detected"], r1["steps"], r1["start_epoch"], r1["epochs_trained"], r1["seed"]) == (0, False, 8, 1, 1, 5), r1
assert r1["test_samples"] == 200 and 0.1 <= r1["test_accuracy"] <= 1, r1
assert r1["last_checkpoint"].endswith("/r1/final.pt"), r1
n = load("bad/nan.json")
assert (n["exit_code"], n["nan_detected"], n["nan_step"], n["test_accuracy"], n["last_checkpoint"]) == (6, True, 4, None, None), n
e = load("bad/nan-eval.json")
assert (e["exit_code"], e["nan_detected"], e["test_accuracy"]) == (6, True, None), e
for name, code in (("trunc", 4), ("bare", 7), ("missing", 3)):
    j = load(f"bad/{name}.json")
    assert j["exit_code"] == code and not j["nan_detected"] and j["test_accuracy"] is None and j["error"], j
PYEOF
echo "pytorch example: all checks passed"
