#!/bin/bash
# The enumerated keys of a campaign configuration (format, inject.role, inject.strata, inject.as,
# restore, verify, mode; keep_crc a boolean) are parsed when the configuration is read: an unknown value is exit 2 with one error
# line naming the key, the value and every accepted value, for `campaign` and `plan` alike, before
# anything runs. The same for the enumerated options of `plan` and `inject` (--role, --as).
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-choices
FLIP=$1

$PY - "$T/g.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["model/w"] = np.ones(64, np.float32)
    f["optimizer/w/m"] = np.full(32, 0.125, np.float32)
PYEOF
config() {  # config FILE EXTRA_JSON_MEMBERS
  $PY - "$1" "$T/g.h5" "$2" <<'PYEOF'
import json, sys
c = {"checkpoint": sys.argv[2], "command": "echo '{\"test_accuracy\": 0.5}' > {out}", "timeout_s": 60, "trials": 2}
c.update(json.loads("{" + sys.argv[3] + "}"))
json.dump(c, open(sys.argv[1], "w"))
PYEOF
}
# bad KEY JSON_MEMBERS VALUE ACCEPTED...: refused by campaign and plan, the line names all of them.
bad() {
  local key=$1 members=$2 value=$3; shift 3
  config "$T/bad.json" "$members"
  rm -rf "$T/out"
  for cmd in "campaign $T/bad.json --out $T/out -q" "plan $T/bad.json"; do
    # shellcheck disable=SC2086
    expect_err 2 "$key" "$FLIP" $cmd
    grep -qF -- "\"$value\"" "$T/stderr" || fail "the error line does not name the value $value: $(cat "$T/stderr")"
    for a in "$@"; do grep -qF -- "\"$a\"" "$T/stderr" || fail "the error line does not name the accepted value $a: $(cat "$T/stderr")"; done
  done
  [ ! -e "$T/out" ] || fail "a refused configuration left an output directory: $members"
}
bad inject.role '"inject": {"role": "weights"}' weights all model optimizer
bad inject.strata '"inject": {"strata": "colour"}' colour none field bit role dtype tensor
bad inject.as '"inject": {"as": "f64"}' f64 bf16 f16
bad restore '"restore": "undo"' undo revert copy
bad verify '"verify": "some"' some touched all
bad mode '"mode": "fork"' fork command worker
bad format '"format": "pickle"' pickle auto hdf5 torch safetensors npy npz
config "$T/bad.json" '"keep_crc": "yes"'
for cmd in "campaign $T/bad.json --out $T/out -q" "plan $T/bad.json"; do
  # shellcheck disable=SC2086
  expect_err 2 keep_crc "$FLIP" $cmd
  grep -qF '"yes"' "$T/stderr" || fail "the error line does not name the value \"yes\": $(cat "$T/stderr")"
done
# Case matters, and a name is not a prefix.
bad inject.role '"inject": {"role": "Model"}' Model all model optimizer
bad verify '"verify": "touch"' touch touched all

# Every accepted value is taken (and a campaign with a non-default one runs).
for v in '"inject": {"role": "optimizer", "strata": "tensor", "as": "bf16"}' '"restore": "copy", "verify": "all"' '"inject": {"as": ""}' \
         '"format": "hdf5", "keep_crc": true' '"format": "auto", "keep_crc": false'; do
  config "$T/ok.json" "$v"
  run "$FLIP" plan "$T/ok.json"
done
config "$T/ok.json" '"inject": {"role": "model", "strata": "dtype"}, "restore": "copy", "verify": "all"'
run "$FLIP" campaign "$T/ok.json" --out "$T/ok" -q
[ "$(cat "$T"/ok/results/*.jsonl | wc -l)" = 2 ] || fail "the campaign with non-default choices did not record 2 trials"

# The command-line choices of plan and inject.
expect_err 2 --role "$FLIP" plan "$T/g.h5" --role weights
expect_err 2 --as "$FLIP" plan "$T/g.h5" --as f64
expect_err 2 --role "$FLIP" inject "$T/g.h5" --dry-run --seed 1 --flips 1 --role weights
expect_err 2 --as "$FLIP" inject "$T/g.h5" --dry-run --seed 1 --flips 1 --as f64
run "$FLIP" plan "$T/g.h5" --role optimizer --as bf16
# --format: a forced adapter reads the file as that format (HDF5 is no torch.save zip: exit 4 naming
# it), for plan on a checkpoint or a configuration and for campaign, before anything runs.
expect_err 2 --format "$FLIP" plan "$T/g.h5" --format pickle
run "$FLIP" plan "$T/g.h5" --format hdf5
expect_err 4 g.h5 "$FLIP" plan "$T/g.h5" --format torch
expect_err 4 g.h5 "$FLIP" plan "$T/ok.json" --format torch
expect_err 4 g.h5 "$FLIP" campaign "$T/ok.json" --out "$T/forced" --format torch -q
[ ! -e "$T/forced/results" ] || fail "a campaign whose checkpoint its --format cannot read left results"
echo "all choice checks passed"
