#!/bin/bash
# A PyTorch user's campaign end to end: examples/pytorch/train.py trains a tiny golden
# .pt, `ckpt-flip campaign` runs examples/pytorch/campaign.json on it (its 6 trials, its command,
# run from the repository root as the README says; only "checkpoint" points into the scratch
# directory), and `ckpt-flip report` summarizes it. Checked: 6 trials recorded with valid classes,
# one logged flip each in a model or optimizer tensor of the .pt, every work copy reverted in
# place (its tensors' checksums verified through the torch adapter), the golden run's final
# weights hashed from its final.pt, the golden .pt untouched; and a campaign killed (-9) mid-run
# and resumed gives the uninterrupted campaign's records trial by trial.
# Exit 77 (CTest SKIP_RETURN_CODE) only when torch cannot be imported.
. "$(dirname "$0")/../support/test_lib.sh" pytorch-campaign
FLIP=$1
"$PY" -c "import torch" 2> /dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch (python3-torch)"; exit 77; }
CAMPAIGN_PID=
on_exit() { [ -n "$CAMPAIGN_PID" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; }
cd "$SRC" || fail "cannot enter the source tree $SRC"

# The golden checkpoint: 1 epoch on 200 images (4 steps), so a trial (resume 1 epoch, evaluate on
# 1000 test images) costs little more than importing torch.
run "$PY" examples/pytorch/train.py train --epochs 1 --limit 200 --seed 19 --save "$T/golden.pt"
GOLDEN_SHA=$(sha256sum < "$T/golden.pt")
"$PY" - "$SRC/examples/pytorch/campaign.json" "$T" <<'PYEOF' || fail "writing the campaign configuration"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["trials"] == 6 and c["command"][1] == "examples/pytorch/train.py", c
c["checkpoint"] = sys.argv[2] + "/golden.pt"
json.dump(c, open(sys.argv[2] + "/campaign.json", "w"), indent=1)
PYEOF

run "$FLIP" campaign "$T/campaign.json" --out "$T/ref" --jobs 2
grep -q "6 trials, 0 already done, 6 run now" "$T/stdout" || { cat "$T/stdout"; fail "the campaign did not run its 6 trials"; }
run "$FLIP" report "$T/ref" --json "$T/ref/report.json" --markdown "$T/ref/report.md" --no-plots
grep -q "6/6 trials" "$T/stdout" || { cat "$T/stdout"; fail "the report does not count 6 of 6 trials"; }
[ "$(sha256sum < "$T/golden.pt")" = "$GOLDEN_SHA" ] || fail "the campaign modified the golden .pt"

# kill -9 of ckpt-flip once two trials are recorded (golden.json, the golden run's reference, is
# reused rather than recomputed: it is the same file); the re-run completes the campaign.
mkdir -p "$T/k9"
cp "$T/ref/golden.json" "$T/k9/"
kill9_campaign "$T/k9" 2 "$FLIP" campaign "$T/campaign.json" --out "$T/k9" --jobs 2
run "$FLIP" campaign "$T/campaign.json" --out "$T/k9" --jobs 2
grep -q "already done" "$T/stdout" || { cat "$T/stdout"; fail "the re-run did not skip the recorded trials"; }
[ "$(sha256sum < "$T/golden.pt")" = "$GOLDEN_SHA" ] || fail "the killed campaign modified the golden .pt"

"$PY" - "$T" <<'PYEOF' || fail "campaign records"
import glob, json, sys
t = sys.argv[1]
classes = {"load_failure", "hang", "crash", "nan_at_load", "nan_later", "critical_sdc", "tolerable_sdc", "masked", "bit_masked"}
width = {"f32": 32, "i64": 64}


def records(d):
    out = {}
    for f in glob.glob(f"{t}/{d}/results/*.jsonl"):
        for line in open(f):
            r = json.loads(line)
            assert r["trial"] not in out, f"{d}: trial {r['trial']} recorded twice"
            out[r["trial"]] = r
    return out


ref, k9 = records("ref"), records("k9")
assert sorted(ref) == list(range(6)), f"trials recorded: {sorted(ref)}"
golden = json.load(open(f"{t}/ref/golden.json"))
# The golden run saved {dir}/final.pt: its model weights are hashed through the torch adapter.
assert isinstance(golden["final_weights_xxh64"], str), f"no final-weights hash of the golden final.pt: {golden}"
for n, r in sorted(ref.items()):
    assert r["class"] in classes, r
    assert r["restore"] == "reverted", f"trial {n}: the work copy was {r['restore']}, not reverted and verified"
    assert r["n_flips"] == 1 and len(r["flips"]) == 1, f"trial {n}: {r['n_flips']} flips logged"
    f = r["flips"][0]
    assert f["dataset"].startswith(("/model/", "/optimizer/")), f
    mask, old, new = (int(f[k], 16) for k in ("mask", "old", "new"))
    assert bin(mask).count("1") == 1 and old ^ new == mask and f["bit"] < width[f["dtype"]], f
    assert r["strata"]["field"] == r["stratum"] and r["strata"]["role"] == f["dataset"].split("/")[1], r
    if r["class"] not in ("load_failure", "hang", "crash"):
        assert isinstance(r["metric"], (int, float)) or r["class"].startswith("nan"), r
assert sorted(r["stratum"] for r in ref.values()) == ["exponent", "exponent", "mantissa", "mantissa", "sign", "sign"]
rep = json.load(open(f"{t}/ref/report.json"))
assert rep["trials"]["done"] == 6 and rep["trials"]["missing"] == 0, rep["trials"]
# The resumed campaign: the uninterrupted one's records, trial by trial (all a trial computes).
same = ("class", "metric", "delta", "flips", "exit_code", "signal", "stratum", "strata", "injected_nonfinite", "restore", "trial_seed")
assert sorted(k9) == sorted(ref), f"resumed campaign: trials {sorted(k9)}"
for n in ref:
    a, b = ({k: x.get(k) for k in same} for x in (ref[n], k9[n]))
    assert a == b, f"trial {n} after kill -9 and resume: {b} != {a}"
print("classes:", " ".join(sorted(r["class"] for r in ref.values())))
PYEOF
echo PASS
