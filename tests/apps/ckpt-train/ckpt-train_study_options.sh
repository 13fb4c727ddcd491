#!/bin/bash
# ckpt-train resume's study options on a real 2-rank dp MLP: --loss-every gives one window mean per N
# steps whose sample-weighted average is the epoch's final_loss, and the same curve on a rerun;
# --shuffle-seed changes the run (another data order) and repeats itself; --replica-from 1=FILE with a
# flipped weight leaves exactly rank 1 apart from rank 0 (replica_divergence), while the same flip in
# every replica leaves none apart; --replica-from on an mp checkpoint or with a bad RANK=FILE is exit 2
# naming the option; a resume campaign keeps loss_curve and replica_divergence in its records.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-train-study-options
TRAIN=$1
FLIP=$2
MPI=(mpiexec -n 2)
run "${MPI[@]}" "$TRAIN" train --model mlp --parallel dp --epochs 2 --seed 4 --limit 512 --batch 64 --test-limit 200 --ckpt-dir "$T/ck"
CK=$(ls "$T"/ck/ckpt-step*.h5 | sort | head -1)  # after epoch 1 (8 steps of 64)
resume() { local out=$1; shift; run "${MPI[@]}" "$TRAIN" resume --from "$CK" --epochs 2 --ckpt-dir "$T/r-$out" --summary "$T/$out.json" "$@"; }

resume plain
resume lc --loss-every 3
resume lc2 --loss-every 3
resume order --shuffle-seed 99
resume order2 --shuffle-seed 99
$PY - "$T" <<'PYEOF' || fail "loss curve / shuffle seed"
import json, sys
t = sys.argv[1]
j = lambda n: json.load(open(f"{t}/{n}.json"))
plain, lc, lc2, order, order2 = j("plain"), j("lc"), j("lc2"), j("order"), j("order2")
assert "loss_curve" not in plain and "replica_divergence" not in plain, plain
c = lc["loss_curve"]
# steps 9..16 of the run; windows end at global steps 9, 12, 15 (a multiple of 3): [9], [10-12], [13-15]
assert len(c) == 3 and all(x > 0 for x in c), c
assert lc["test_accuracy"] == plain["test_accuracy"] and lc["final_loss"] == plain["final_loss"], "the option changed the run"
assert c == lc2["loss_curve"], "the curve is not reproducible"
assert order["final_loss"] != plain["final_loss"], "another data order gave the same training loss"
assert (order["final_loss"], order["test_accuracy"]) == (order2["final_loss"], order2["test_accuracy"]), "--shuffle-seed is not deterministic"
PYEOF

# A flipped weight (bit 26 of one element) in a copy: in rank 1 only, and in every replica.
cp "$CK" "$T/bad.h5"
run "$FLIP" inject "$T/bad.h5" --in-place --log "$T/bad-flips.jsonl" --flips 1 --seed 3 --role model --bits 26 --no-sync
resume one --replica-from "1=$T/bad.h5"
resume allr --replica-divergence
run "${MPI[@]}" "$TRAIN" resume --from "$T/bad.h5" --epochs 2 --ckpt-dir "$T/r-all" --summary "$T/all.json" --replica-divergence
$PY - "$T" <<'PYEOF' || fail "replica divergence"
import json, sys
t = sys.argv[1]
one, clean, allr = (json.load(open(f"{t}/{n}.json")) for n in ("one", "allr", "all"))
d = one["replica_divergence"]
assert d["ranks_differing"] == 1 and d["elements_differing"] >= 1 and d["max_abs_difference"] > 0, d
assert d["elements"] > 200000, d  # every model weight of the MLP is compared
for s in (clean, allr):
    z = s["replica_divergence"]
    assert z["ranks_differing"] == 0 and z["elements_differing"] == 0 and z["max_abs_difference"] == 0, z
assert allr["final_loss"] != clean["final_loss"], "the flip in every replica changed nothing"
PYEOF

# Bad use: an mp checkpoint, a rank out of range, a malformed value: exit 2 naming the option.
run "${MPI[@]}" "$TRAIN" train --model mlp --parallel mp --epochs 2 --seed 4 --limit 256 --batch 64 --test-limit 100 --ckpt-dir "$T/mp"
MAN=$(ls "$T"/mp/ckpt-step*.manifest.json | sort | head -1)
for bad in "--from $MAN --replica-from 1=$T/bad.h5" "--from $CK --replica-from 2=$T/bad.h5" "--from $CK --replica-from one=$T/bad.h5" \
           "--from $CK --replica-from 1="; do
  # shellcheck disable=SC2086
  "${MPI[@]}" "$TRAIN" resume $bad --epochs 2 --ckpt-dir "$T/r-bad" > "$T/out" 2> "$T/err"
  rc=$?
  [ "$rc" = 2 ] && grep -q -- "--replica-from" "$T/err" || { cat "$T/err"; fail "exit $rc for $bad (want 2 naming --replica-from)"; }
  [ "$(wc -l < "$T/err")" = 1 ] || { cat "$T/err"; fail "$bad: not one error line (every rank agrees on it; rank 0 reports)"; }
done

# A resume campaign keeps the loss curve and the divergence in its records.
cat > "$T/c.json" <<JSON
{"name": "study-options", "checkpoint": "$CK",
 "command": ["mpiexec", "-n", "2", "$TRAIN", "resume", "--from", "$CK", "--replica-from", "1={ckpt}", "--epochs", "2",
             "--ckpt-dir", "{dir}", "--summary", "{out}", "--loss-every", "3"],
 "trials": 2, "seed": 1, "timeout_s": 120, "inject": {"flips": 1, "role": "model", "bits": "26"}}
JSON
run "$FLIP" campaign "$T/c.json" --out "$T/camp" --quiet
$PY - "$T" <<'PYEOF' || fail "campaign records"
import glob, json, sys
recs = [json.loads(l) for f in glob.glob(sys.argv[1] + "/camp/results/*.jsonl") for l in open(f)]
assert len(recs) == 2, recs
for r in recs:
    s = r["summary"]
    assert len(s["loss_curve"]) == 3 and s["replica_divergence"]["ranks_differing"] == 1, s
PYEOF
echo "ckpt-train study options: all checks passed"
