#!/bin/bash
# examples/pytorch as its README says, from a fresh copy of the checkout: every ```sh block of
# examples/pytorch/README.md, then of docs/guide/pytorch.md, is run as written, line by line, in a
# copy of the source tree's files
# (tracked and new ones, no out/, build/bin linked to the ckpt-flip under test): train.py trains
# the golden .pt into out/pytorch/ (which does not exist), the command-mode resume campaign and its
# report, the trial function once, the worker-mode eval campaign and its report. Checked: 6 resume
# trials with valid classes, one logged flip each in a model or optimizer tensor of the .pt, every
# work copy reverted in place and verified, the golden run's final weights hashed from its final.pt,
# the golden .pt untouched; 60 eval trials of the model's tensors only, classified on two metrics;
# and the resume campaign killed (-9) mid-run and resumed gives the uninterrupted one's records.
# Exit 77 (CTest SKIP_RETURN_CODE) only when torch cannot be imported.
. "$(dirname "$0")/../../support/test_lib.sh" pytorch-campaign
FLIP=$1
"$PY" -c "import torch" 2> /dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch (python3-torch)"; exit 77; }
CAMPAIGN_PID=
on_exit() { [ -n "$CAMPAIGN_PID" ] && kill -9 "$CAMPAIGN_PID" 2> /dev/null; }

# The fresh copy: the files git knows of (and new ones it does not ignore), nothing built or run.
C=$T/clone
"$PY" - "$SRC" "$C" <<'PYEOF' || fail "copying the checkout"
import os, shutil, subprocess, sys
src, dst = sys.argv[1], sys.argv[2]
files = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], check=True,
                       capture_output=True).stdout.decode().split("\0")
for f in filter(None, files):
    if os.path.isfile(os.path.join(src, f)):
        os.makedirs(os.path.dirname(os.path.join(dst, f)), exist_ok=True)
        shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
PYEOF
[ ! -e "$C/out" ] || fail "the copy has an out/ already"
mkdir -p "$C/build"
ln -s "$(cd "$(dirname "$FLIP")" && pwd)" "$C/build/bin"

# The README's sh blocks, each line as written, from the copy's root; then those of
# docs/guide/pytorch.md, the same workflow in five commands (its campaign finds its trials done).
"$PY" - "$C/examples/pytorch/README.md" "$C/docs/guide/pytorch.md" > "$T/readme.sh" <<'PYEOF' || fail "reading the sh blocks"
import sys
for doc, least in zip(sys.argv[1:], (6, 5)):
    lines, inside = [], False
    for line in open(doc):
        if line.startswith("```"):
            inside = line.strip() == "```sh" if not inside else False
            continue
        if inside and line.strip():
            lines.append(line.rstrip("\n"))
    assert len(lines) >= least, (doc, lines)
    print("\n".join(lines))
PYEOF
cat "$T/readme.sh"
(cd "$C" && bash -e -x "$T/readme.sh") > "$T/readme.log" 2>&1 || { tail -40 "$T/readme.log"; fail "the documented commands failed in a fresh copy"; }
grep -q "6 trials, 0 already done, 6 run now" "$T/readme.log" || { cat "$T/readme.log"; fail "the resume campaign did not run its 6 trials"; }
grep -q "60 trials, 0 already done, 60 run now" "$T/readme.log" || { cat "$T/readme.log"; fail "the eval campaign did not run its 60 trials"; }
grep -q "60 trials, 60 already done, 0 run now" "$T/readme.log" || { cat "$T/readme.log"; fail "the guide's campaign did not find the README's trials"; }
grep -q "/model/fc1.weight\|fc1.weight  f32\[32,784\]" "$T/readme.log" || fail "the guide's inspect did not list the tensors"
grep -q "note: inject.role model" "$T/readme.log" || fail "the eval campaign does not say it flips the model's tensors only"
for f in out/pytorch/campaign/report.md out/pytorch/eval/report.md out/pytorch/eval/report.json out/pytorch/golden-eval.json; do
  [ -s "$C/$f" ] || fail "the README's commands did not write $f"
done
GOLDEN_SHA=$(sha "$C/out/pytorch/golden.pt")

# kill -9 of ckpt-flip once two trials are recorded (golden.json, the golden run's reference, is
# reused rather than recomputed: it is the same file); the re-run completes the campaign.
cd "$C" || fail "cannot enter the copy"
mkdir -p "$T/k9"
cp out/pytorch/campaign/golden.json "$T/k9/"
kill9_campaign "$T/k9" 2 "$FLIP" campaign examples/pytorch/campaign.json --out "$T/k9" --jobs 2
run "$FLIP" campaign examples/pytorch/campaign.json --out "$T/k9" --jobs 2
grep -q "already done" "$T/stdout" || { cat "$T/stdout"; fail "the re-run did not skip the recorded trials"; }
[ "$(sha "$C/out/pytorch/golden.pt")" = "$GOLDEN_SHA" ] || fail "the killed campaign modified the golden .pt"

"$PY" - "$C/out/pytorch" "$T/k9" <<'PYEOF' || fail "campaign records"
import glob, json, sys
t, k9dir = sys.argv[1], sys.argv[2]
classes = {"load_failure", "hang", "crash", "unreadable_summary", "nan_at_load", "nan_later", "critical_sdc", "tolerable_sdc", "masked", "bit_masked"}
width = {"f32": 32, "i64": 64}


def records(d):
    out = {}
    for f in glob.glob(f"{d}/results/*.jsonl"):
        for line in open(f):
            r = json.loads(line)
            assert r["trial"] not in out, f"{d}: trial {r['trial']} recorded twice"
            out[r["trial"]] = r
    return out


ref, k9 = records(t + "/campaign"), records(k9dir)
assert sorted(ref) == list(range(6)), f"trials recorded: {sorted(ref)}"
golden = json.load(open(f"{t}/campaign/golden.json"))
# The golden run saved {dir}/final.pt: its model weights are hashed through the torch adapter.
assert isinstance(golden["final_weights_xxh64"], str), f"no final-weights hash of the golden final.pt: {golden}"
for n, r in sorted(ref.items()):
    assert r["class"] in classes and r["class"] != "unreadable_summary", r
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
# The resumed campaign: the uninterrupted one's records, trial by trial (all a trial computes).
same = ("class", "metric", "delta", "flips", "exit_code", "signal", "stratum", "strata", "injected_nonfinite", "restore", "trial_seed")
assert sorted(k9) == sorted(ref), f"resumed campaign: trials {sorted(k9)}"
for n in ref:
    a, b = ({k: x.get(k) for k in same} for x in (ref[n], k9[n]))
    assert a == b, f"trial {n} after kill -9 and resume: {b} != {a}"
ev = records(t + "/eval")
assert sorted(ev) == list(range(60)), sorted(ev)
for r in ev.values():
    assert r["flips"][0]["dataset"].startswith("/model/"), r["flips"]
    assert set(r["metrics"]) == {"test_accuracy", "test_loss"} or r["class"] in ("crash", "hang", "load_failure"), r
    assert r["class"] in classes and r["class"] != "unreadable_summary", r
rep = json.load(open(t + "/eval/report.json"))
assert rep["trials"]["done"] == 60 and [m["name"] for m in rep["metrics"]] == ["test_accuracy", "test_loss"], rep["trials"]
print("resume:", " ".join(sorted(r["class"] for r in ref.values())))
print("eval:", json.dumps({k: v["x"] for k, v in rep["overall"]["classes"].items() if v["x"]}))
PYEOF
echo PASS
