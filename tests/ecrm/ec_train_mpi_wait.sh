#!/usr/bin/env bash
# ec-train and ckpt-train --mpi-wait (alias --poll-us): what auto picks (yield when every rank on
# the node has a CPU; when not, here 2 ranks pinned to one CPU with taskset: a 20 us sleep for ec-train,
# a sleep backing off from 20 to 160 us for ckpt-train), that
# the report and the summary record it, that explicit settings are kept, that a bad value is a
# usage error naming the option, and that how ranks wait never changes a result (one state_hash).
# usage: ec_train_mpi_wait.sh EC_TRAIN CKPT_TRAIN MPIEXEC WORKDIR
set -euo pipefail
EC=$1 CT=$2 MPIEXEC=$3 T=$4
rm -rf "$T" && mkdir -p "$T"
fail() { echo "FAIL: $*"; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
S=(--tables 2 --rows 256 --dim 4 --batch 16 --rows-per-fragment 4 --k 1 --m 1 --steps 12 --seed 5 --fail 1@6)

ec() {  # ec() NAME EXPECTED_WAIT [launcher prefix...] -- [ec-train args...]
  local name=$1 want=$2; shift 2
  local pre=(); while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
  "${pre[@]}" "$MPIEXEC" -n 2 "$EC" "${S[@]}" --report "$T/$name.json" "$@" > "$T/$name.log" 2>&1 || fail "$name: exit $? ($(tail -1 "$T/$name.log"))"
  local got; got=$(field "$T/$name.json" mpi_wait)
  [ "$got" = "$want" ] || fail "$name: mpi_wait '$got', expected '$want'"
  echo "ok: $name: $got"
}

ec pinned "sleep 20 us" taskset -c 0 --
if [ "$(nproc)" -ge 2 ]; then ec free yield --; else echo "skip: one CPU, auto cannot pick yield"; fi
ec spin spin -- --mpi-wait spin
ec yield yield taskset -c 0 -- --mpi-wait yield
ec sleep "sleep 200 us" -- --poll-us 200
ec zero spin -- --poll-us 0
ec backoff "backoff 20-160 us" -- --mpi-wait backoff

ref=$(field "$T/pinned.json" state_hash)
for n in spin yield sleep zero backoff; do
  [ "$(field "$T/$n.json" state_hash)" = "$ref" ] || fail "$n: state_hash differs from the pinned run's $ref"
done
echo "ok: one state_hash ($ref) whatever the wait"

for bad in -1 bogus 100001 ""; do
  set +e; out=$("$EC" "${S[@]}" --mpi-wait "$bad" 2>&1 >/dev/null); rc=$?; set -e
  [ $rc -eq 2 ] || fail "--mpi-wait '$bad': exit $rc, expected 2"
  [[ "$out" == *"--mpi-wait"* ]] || fail "--mpi-wait '$bad': the error does not name the option: $out"
done
echo "ok: bad values are usage errors naming --mpi-wait"

# ckpt-train: the summary records the wait of a multi-rank run (none for one process).
for w in auto spin crowded; do
  pre=(); [ $w = crowded ] && pre=(taskset -c 0)
  want=$([ $w = spin ] && echo spin || ([ "$(nproc)" -ge 2 ] && [ $w = auto ] && echo yield || echo "backoff 20-160 us"))
  "${pre[@]}" "$MPIEXEC" -n 2 "$CT" train --model mlp --parallel dp --epochs 1 --limit 512 --test-limit 256 --seed 3 \
    --ckpt-dir "$T/ck-$w" --summary "$T/ct-$w.json" --mpi-wait ${w/crowded/auto} > "$T/ct-$w.log" 2>&1 || fail "ckpt-train --mpi-wait $w: $(tail -1 "$T/ct-$w.log")"
  got=$(field "$T/ct-$w.json" mpi_wait)
  [ "$got" = "$want" ] || fail "ckpt-train --mpi-wait $w: mpi_wait '$got', expected '$want'"
  [ "$(field "$T/ct-$w.json" final_loss)" = "$(field "$T/ct-auto.json" final_loss)" ] || fail "ckpt-train --mpi-wait $w: another final loss"
done
"$CT" train --model mlp --epochs 1 --limit 256 --test-limit 256 --seed 3 --ckpt-dir "$T/ck-1" --summary "$T/ct-1.json" > /dev/null 2>&1
/usr/bin/python3 -c 'import json,sys; sys.exit("mpi_wait" in json.load(open(sys.argv[1])))' "$T/ct-1.json" || fail "one-process summary names an mpi_wait"
echo "ok: ckpt-train summaries"
