#!/bin/bash
# ckpt-flip as a black box: exit codes, determinism, no partial outputs, damaged files, dry-run,
# pattern files, in-place + revert, and kill -9 during --in-place followed by revert.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-cli
FLIP=$1
$PY - "$T/in.h5" "$T/other.h5" <<'PYEOF'
import sys, h5py, numpy as np
for seed, path in enumerate(sys.argv[1:]):
    r = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f["model/w"] = r.standard_normal((200, 100)).astype("f4")
        f.create_dataset("model/g", data=r.standard_normal((400, 300)).astype("f4"), chunks=(100, 100), compression="gzip", shuffle=True)
        f["model/b"] = r.standard_normal(100).astype("f2")
PYEOF
SHA=$(sha256sum "$T/in.h5" | cut -d' ' -f1)

# Help with examples on every subcommand.
for c in inspect inject revert replay diff scan; do
  help=$("$FLIP" $c --help) || fail "$c --help exited $?"
  grep -q "Examples:" <<< "$help" || fail "$c --help has no examples"  # not a pipe: grep -q leaving early would SIGPIPE the writer
done

# Same seed => identical log records and output; IN never modified.
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/a.h5" --seed 5 --flips 50 --log "$T/a.jsonl"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/b.h5" --seed 5 --flips 50 --log "$T/b.jsonl"
cmp -s "$T/a.h5" "$T/b.h5" || fail "same seed, different output"
diff <(tail -n +2 "$T/a.jsonl") <(tail -n +2 "$T/b.jsonl") > /dev/null || fail "same seed, different records"
[ "$(grep -c '"type":"flip"' "$T/a.jsonl")" = 50 ] || fail "--flips 50 did not log 50 records"
[ "$(sha256sum "$T/in.h5" | cut -d' ' -f1)" = "$SHA" ] || fail "input modified"
# The default identity is sample-sha256 (sample_sha256.py: its definition in Python); --hash sha256
# logs SHA-256 under both key names.
SAMPLE="$SRC/tests/apps/ckpt-flip/sample_sha256.py"
grep -q "\"input_hash\":\"$($PY "$SAMPLE" "$T/in.h5")\"" "$T/a.jsonl" || fail "input hash not logged"
grep -q "\"output_hash\":\"$($PY "$SAMPLE" "$T/a.h5")\"" "$T/a.jsonl" || fail "output hash not logged"
grep -q '"hash":"sample-sha256"' "$T/a.jsonl" || fail "hash algorithm not logged"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/a2.h5" --seed 5 --flips 50 --hash sha256 --log "$T/a2.jsonl"
grep -q "\"input_sha256\":\"$SHA\"" "$T/a2.jsonl" || fail "--hash sha256: input hash not logged"
grep -q "\"output_sha256\":\"$(sha256sum "$T/a2.h5" | cut -d' ' -f1)\"" "$T/a2.jsonl" || fail "--hash sha256: output hash not logged"
# A seed not given is drawn, printed and logged.
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/c.h5" --flips 3 --log "$T/c.jsonl"
S=$(sed -n 's/^seed: \([0-9]*\).*/\1/p' "$T/stdout"); [ -n "$S" ] || fail "drawn seed not printed"
grep -q "\"seed\":$S," "$T/c.jsonl" || fail "drawn seed not logged"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/c2.h5" --seed "$S" --flips 3 --log "$T/c2.jsonl"
cmp -s "$T/c.h5" "$T/c2.h5" || fail "printed seed does not reproduce"

# Dry run: prints and writes nothing.
expect_rc 0 "$FLIP" inject "$T/in.h5" --dry-run --seed 1 --flips 4 --bits exponent-msb
grep -q "planned 4" "$T/stdout" || fail "dry-run output"
grep -Eq "becomes Inf|becomes NaN|x1e" "$T/stdout" || fail "dry-run does not flag magnitude jumps"

# replay onto a copy and revert: byte identity.
expect_rc 0 "$FLIP" replay "$T/in.h5" --log "$T/a.jsonl" -o "$T/r.h5"
cmp -s "$T/a.h5" "$T/r.h5" || fail "replay -o not identical to the injected file"
cp "$T/a.h5" "$T/rv.h5"
expect_rc 0 "$FLIP" revert "$T/rv.h5" --log "$T/a.jsonl"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/rv.h5"; grep -q identical "$T/stdout" || fail "revert not exact"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/a.h5" --json; grep -q '"identical": false' "$T/stdout" || fail "diff --json"

# Pattern files drive the model; scan says suspect (10) after exponent flips, clean (0) before.
echo '{"patterns":[{"mask":"0x3","p":0.5},{"bits":[0,2],"p":0.5}]}' > "$T/p.json"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/p.h5" --seed 2 --flips 20 --model "pattern:$T/p.json" --log "$T/p.jsonl"
expect_rc 0 "$FLIP" scan "$T/in.h5"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/e.h5" --seed 2 --flips 3 --bits exponent-msb --include /model/g --log "$T/e.jsonl"
expect_rc 10 "$FLIP" scan "$T/e.h5"
expect_rc 0 "$FLIP" inspect "$T/in.h5" --json; grep -q total_bits "$T/stdout" || fail "inspect --json"

# Usage errors (2), I/O errors (3), corrupt input (4), nothing selected (5): one line, no output left.
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --log "$T/x.jsonl"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 0 --log "$T/x.jsonl"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --bits nonsense --log "$T/x.jsonl"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --include 'a[b' --log "$T/x.jsonl"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --model gamma --log "$T/x.jsonl"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 99999999 --log "$T/x.jsonl"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/in.h5" --seed 1 --flips 1 --log "$T/x.jsonl"
expect_rc 3 "$FLIP" inject "$T/in.h5" -o "$T/nodir/x.h5" --seed 1 --flips 1 --log "$T/x.jsonl"
expect_rc 5 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --include '/nope/*' --log "$T/x.jsonl"
expect_rc 5 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --role optimizer --log "$T/x.jsonl"
echo '{"patterns":[]}' > "$T/bad.json"
expect_rc 4 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --model "pattern:$T/bad.json" --log "$T/x.jsonl"
echo "not a log" > "$T/bad.jsonl"
expect_rc 4 "$FLIP" revert "$T/a.h5" --log "$T/bad.jsonl"
expect_rc 7 "$FLIP" replay "$T/other.h5" --log "$T/e.jsonl"   # wrong file for this log
expect_rc 7 "$FLIP" revert "$T/other.h5" --log "$T/e.jsonl"
# A record's N-d index that is not its flat index in the file's shape (a hand edit): exit 7, file unchanged.
sed -E '0,/"nd":\[[0-9]+/s//"nd":[999999/' "$T/a.jsonl" > "$T/nd.jsonl"
cmp -s "$T/a.jsonl" "$T/nd.jsonl" && fail "test setup: no \"nd\" edited"
cp "$T/a.h5" "$T/nd.h5"; NDSHA=$(sha256sum "$T/nd.h5" | cut -d' ' -f1)
expect_rc 7 "$FLIP" revert "$T/nd.h5" --log "$T/nd.jsonl"
grep -q "is not its flat index" "$T/stderr" || fail "nd mismatch not named"
[ "$(sha256sum "$T/nd.h5" | cut -d' ' -f1)" = "$NDSHA" ] || fail "revert with a mismatched nd changed the file"
[ -e "$T/x.h5" ] && fail "partial output left behind"
[ -e "$T/x.jsonl" ] && fail "partial log left behind"
ls -a "$T" | grep -q '\.tmp\.' && fail "temporary file left behind"
[ "$(sha256sum "$T/in.h5" | cut -d' ' -f1)" = "$SHA" ] || fail "input modified by a failing run"
head -c 5000 /dev/urandom > "$T/junk.h5"
for c in inspect scan; do expect_rc 4 "$FLIP" $c "$T/junk.h5"; done
expect_rc 4 "$FLIP" inject "$T/junk.h5" -o "$T/x.h5" --seed 1 --flips 1 --log "$T/x.jsonl"

# --raw: damage anywhere in the file; every command fails cleanly (exit 0/4/10, never a crash).
for s in 1 2 3 4 5 6 7 8; do
  expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/raw.h5" --raw --seed $s --flips 200 --log "$T/raw.jsonl"
  for c in "inspect $T/raw.h5" "scan $T/raw.h5" "diff $T/in.h5 $T/raw.h5" "inject $T/raw.h5 --dry-run --seed 1 --flips 5"; do
    "$FLIP" $c > /dev/null 2> "$T/err"; rc=$?
    case $rc in 0|3|4|5|7|10) ;; *) cat "$T/err"; fail "raw seed $s: '$c' exited $rc";; esac
    [ "$(wc -l < "$T/err")" -le 1 ] || { cat "$T/err"; fail "raw seed $s: '$c' printed more than one error line"; }
  done
  expect_rc 0 "$FLIP" revert "$T/raw.h5" --log "$T/raw.jsonl"
  cmp -s "$T/in.h5" "$T/raw.h5" || fail "raw revert not byte-identical"
done

# --in-place then revert: byte-identical datasets.
cp "$T/in.h5" "$T/ip.h5"
expect_rc 0 "$FLIP" inject "$T/ip.h5" --in-place --seed 9 --flips 100 --log "$T/ip.jsonl"
grep -q '"type":"footer"' "$T/ip.jsonl" || fail "in-place log has no footer"
expect_rc 0 "$FLIP" revert "$T/ip.h5" --log "$T/ip.jsonl"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/ip.h5"; grep -q identical "$T/stdout" || fail "in-place revert"

# kill -9 during --in-place, at increasing delays; revert must restore the datasets every time.
$PY - "$T/big.h5" <<'PYEOF'
import sys, h5py, numpy as np
r = np.random.default_rng(1)
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("g", data=r.standard_normal((2000, 2000)).astype("f4"), chunks=(100, 100), compression="gzip", shuffle=True)
    f["c"] = r.standard_normal((2000, 500)).astype("f4")
PYEOF
interrupted=0
for delay in 0 0.02 0.05 0.1 0.2 0.3 0.5; do
  cp "$T/big.h5" "$T/k.h5"
  rm -f "$T/k.jsonl"
  "$FLIP" inject "$T/k.h5" --in-place --seed 4 --flips 200000 --log "$T/k.jsonl" --no-hash > /dev/null 2>&1 &
  pid=$!
  # Wait until the last record is in the log (it is fsynced before the file is touched), then kill.
  for _ in $(seq 1000); do
    tail -c 4096 "$T/k.jsonl" 2> /dev/null | grep -q '"seq":199999' && break
    sleep 0.01
  done
  sleep $delay
  kill -9 $pid 2> /dev/null
  wait $pid 2> /dev/null
  grep -q '"type":"footer"' "$T/k.jsonl" || interrupted=$((interrupted + 1))
  "$FLIP" revert "$T/k.h5" --log "$T/k.jsonl" > "$T/rv.txt" 2>&1 || { cat "$T/rv.txt"; fail "revert after kill -9 (delay $delay)"; }
  "$FLIP" diff "$T/big.h5" "$T/k.h5" | grep -q identical || fail "revert after kill -9 not exact (delay $delay)"
done
# Killed before its log was complete: the file must be untouched.
cp "$T/big.h5" "$T/k.h5"
"$FLIP" inject "$T/k.h5" --in-place --seed 4 --flips 200000 --log "$T/k.jsonl" --no-hash > /dev/null 2>&1 &
pid=$!; sleep 0.05; kill -9 $pid 2> /dev/null; wait $pid 2> /dev/null
if ! tail -c 4096 "$T/k.jsonl" | grep -q '"seq":199999'; then
  cmp -s "$T/big.h5" "$T/k.h5" || fail "file changed before its log was complete"
fi
echo "kill -9: $interrupted run(s) killed during the apply phase"
[ $interrupted -ge 1 ] || fail "no kill landed during the apply phase; adjust delays"
echo "ckpt-flip CLI OK"
