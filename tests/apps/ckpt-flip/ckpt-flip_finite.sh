#!/bin/bash
# inject --finite: on a file where 1000 plain flips leave NaN/Inf (f32 in [1, 2) and f16
# near 65504: an exponent flip makes the exponent all ones), 1000 flips with --finite leave none
# (h5py); the log header says finite and how many draws were rejected (the same number the run
# prints; every record's new value is finite); the same seed gives the same log with -o, --in-place
# and --dry-run; revert restores the file; a selection where no flip stays finite is exit 5, one
# line naming the file, nothing written.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-finite
FLIP=$1

$PY - "$T" <<'PYEOF'
import sys, h5py, numpy as np
T = sys.argv[1]
r = np.random.default_rng(3)
with h5py.File(f"{T}/in.h5", "w") as f:
    f["model/w"] = (1 + r.random((64, 32))).astype("f4")            # exponent 0x7f: bit 30 -> Inf/NaN
    f["model/h"] = np.full(512, 65504, "f2")                        # exponent 11110: bit 10 -> NaN
    f["model/d"] = (1 + r.random(256)).astype("f8")                 # exponent 0x3ff: bit 62 -> Inf/NaN
    f["model/n"] = np.arange(300, dtype="i4")                       # integers: --finite changes nothing
PYEOF
# Count NaN/Inf in every float dataset of a file.
nonfinite() {
  $PY -c "
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    print(sum(int((~np.isfinite(f[k][()])).sum()) for k in ['model/w', 'model/h', 'model/d']))" "$1"
}
in_sha=$(sha "$T/in.h5")

run "$FLIP" inject "$T/in.h5" -o "$T/plain.h5" --seed 11 --flips 1000 --bits exponent --log "$T/plain.jsonl"
n=$(nonfinite "$T/plain.h5")
[ "$n" -gt 0 ] || fail "plain inject left no NaN/Inf ($n): the test file does not exercise --finite"

run "$FLIP" inject "$T/in.h5" -o "$T/fin.h5" --seed 11 --flips 1000 --bits exponent --finite --log "$T/fin.jsonl"
printed=$(sed -n 's/.*; \([0-9]*\) draw(s) rejected (--finite)$/\1/p' "$T/stdout")
[ -n "$printed" ] || { cat "$T/stdout"; fail "inject --finite printed no rejected count"; }
n=$(nonfinite "$T/fin.h5")
[ "$n" = 0 ] || fail "inject --finite left $n NaN/Inf values"
[ "$(sha "$T/in.h5")" = "$in_sha" ] || fail "inject -o changed its input"

# The header: finite, rejected = what the run printed (> 0 here); 1000 records, all finite.
$PY - "$T/fin.jsonl" "$printed" <<'PYEOF' || fail "the --finite log is not as expected"
import sys, json, math
lines = [json.loads(l) for l in open(sys.argv[1])]
h = lines[0]
assert h["type"] == "header" and h["finite"] is True, h
assert h["rejected"] == int(sys.argv[2]) and h["rejected"] > 0, (h["rejected"], sys.argv[2])
recs = [l for l in lines if l["type"] == "flip"]
assert len(recs) == 1000 == h["planned"], len(recs)
for r in recs:
    v = r["new_value"]
    assert not isinstance(v, str), r          # "nan", "inf", "-inf" are strings
    assert math.isfinite(v), r
PYEOF
# A plain log has no finite/rejected keys (older readers see what they always saw).
grep -q '"finite"\|"rejected"' <(head -1 "$T/plain.jsonl") && fail "a log without --finite has finite/rejected keys"

# Same seed, same sites: again with -o, in place, and as a dry run.
records() { grep '"type":"flip"' "$1" | sed 's/"seq":[0-9]*,//'; }
run "$FLIP" inject "$T/in.h5" -o "$T/fin2.h5" --seed 11 --flips 1000 --bits exponent --finite --log "$T/fin2.jsonl"
cmp <(records "$T/fin.jsonl") <(records "$T/fin2.jsonl") || fail "same seed, other sites"
cp "$T/in.h5" "$T/place.h5"
run "$FLIP" inject "$T/place.h5" --in-place --seed 11 --flips 1000 --bits exponent --finite --log "$T/place.jsonl"
cmp <(records "$T/fin.jsonl") <(records "$T/place.jsonl") || fail "--in-place drew other sites"
[ "$(head -1 "$T/place.jsonl" | $PY -c 'import sys, json; print(json.load(sys.stdin)["rejected"])')" = "$printed" ] || fail "--in-place: other rejected count"
run "$FLIP" inject "$T/in.h5" --dry-run --seed 11 --flips 1000 --bits exponent --finite
grep -q "planned 1000 fault(s), model flip, seed 11, trial 0, $printed draw(s) rejected (--finite)" "$T/stdout" || { head -2 "$T/stdout"; fail "dry run: other plan"; }
run "$FLIP" revert "$T/place.h5" --log "$T/place.jsonl"
$PY -c "
import sys, h5py, numpy as np
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
for k in ['model/w', 'model/h', 'model/d', 'model/n']:
    assert a[k][()].tobytes() == b[k][()].tobytes(), k" "$T/in.h5" "$T/place.h5" || fail "revert did not restore the data"

# Integers only: --finite rejects nothing and draws what plain inject draws.
run "$FLIP" inject "$T/in.h5" --dry-run --seed 5 --flips 50 --include /model/n
grep -v '^planned' "$T/stdout" > "$T/int_plain"
run "$FLIP" inject "$T/in.h5" --dry-run --seed 5 --flips 50 --include /model/n --finite
grep -q ", 0 draw(s) rejected" "$T/stdout" || fail "--finite rejected draws on integers"
grep -v '^planned' "$T/stdout" | cmp - "$T/int_plain" || fail "--finite changed the draw on integers"

# Nothing stays finite: bit 10 of 65504 in f16 is NaN in every word. Exit 5, one line naming the
# file and the count, no output, no log, input untouched.
for mode in "-o $T/none.h5" "--in-place"; do
  cp "$T/in.h5" "$T/edge.h5"
  edge_sha=$(sha "$T/edge.h5")
  # shellcheck disable=SC2086
  expect_err 5 "$T/edge.h5" "$FLIP" inject "$T/edge.h5" $mode --seed 1 --flips 3 --bits 10 --include /model/h --finite --log "$T/none.jsonl"
  grep -q "only 0 of the 512 selected sites keep a finite value" "$T/stderr" || { cat "$T/stderr"; fail "the error does not say how many sites stay finite"; }
  [ "$(sha "$T/edge.h5")" = "$edge_sha" ] || fail "a refused --finite run changed its input ($mode)"
  [ ! -e "$T/none.h5" ] && [ ! -e "$T/none.jsonl" ] || fail "a refused --finite run left an output or a log ($mode)"
  ls -a "$T" | grep -q '\.tmp\.' && fail "a refused --finite run left a temporary ($mode)"
done
# Campaigns: "inject": {"finite": true} gives trials whose faults are all finite, where the same
# campaign without it injects NaN/Inf; a non-boolean value is exit 2 naming the key.
campaign() {
  $PY - "$T/in.h5" "$1" > "$T/camp.json" <<'PYEOF'
import json, sys
inject = dict({"flips": 40, "bits": "exponent"}, **json.loads(sys.argv[2]))
print(json.dumps({"name": "f", "checkpoint": sys.argv[1], "command": "echo '{\"acc\": 1}' > {out}", "metric": "acc",
                  "trials": 6, "seed": 2, "inject": inject}))
PYEOF
  rm -rf "$T/camp"
  run "$FLIP" campaign "$T/camp.json" --out "$T/camp"
  cat "$T"/camp/results/*.jsonl | $PY -c 'import sys, json; print(sum(json.loads(l)["injected_nonfinite"] for l in sys.stdin))'
}
[ "$(campaign '{}')" -gt 0 ] || fail "the campaign without finite injected no NaN/Inf: the test does not exercise it"
[ "$(campaign '{"finite": true}')" = 0 ] || fail "a campaign with \"finite\": true injected NaN/Inf"
$PY -c 'import json, sys; assert json.load(open(sys.argv[1]))["config"]["inject"]["finite"] is True' "$T/camp/campaign.json" || fail "campaign.json does not record inject.finite"
$PY -c 'import json, sys; c = json.load(open(sys.argv[1])); c["inject"]["finite"] = "yes"; json.dump(c, open(sys.argv[1], "w"))' "$T/camp.json"
expect_err 2 "finite" "$FLIP" campaign "$T/camp.json" --out "$T/camp2"

expect_err 2 "--finite" "$FLIP" inject "$T/in.h5" -o "$T/raw.h5" --raw --finite --seed 1 --flips 3 --log "$T/raw.jsonl"
echo "PASS"
