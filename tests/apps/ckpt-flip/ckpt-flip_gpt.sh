#!/bin/bash
# ckpt-flip on gpt checkpoints (fp32 and bf16; none, dp, pp and tp): every tensor has its role (bf16
# weights model, their fp32 masters master, AdamW moments optimizer), --role selects each, and a flip
# in a tp shard's sliced tensor is logged with its element of the global tensor, checked with h5py
# against the global tensor put together from the shards by Megatron-LM's layout (written out here,
# not read from the shards) and against the serial checkpoint's shapes.
# Usage: ckpt-flip_gpt.sh CKPT-FLIP CKPT-TRAIN MPIEXEC
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-gpt
FLIP=$1 TRAIN=$2 MPIEXEC=$3
export PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}"
# 2 blocks of width 32 with 2 heads, 256 windows of 32 bytes in batches of 32: 8 steps, under a second.
GPT=(train --model gpt --layers 2 --heads 2 --width 32 --context 32 --limit 256 --test-limit 32 --batch 32 --epochs 1 --seed 7 --lr 1e-2)
S=ckpt-step00000008
run "$TRAIN" "${GPT[@]}" --ckpt-dir "$T/none"
run "$TRAIN" "${GPT[@]}" --precision bf16 --ckpt-dir "$T/bf16"
run "$MPIEXEC" -n 2 "$TRAIN" "${GPT[@]}" --parallel dp --precision bf16 --ckpt-dir "$T/dp"
run "$MPIEXEC" -n 2 "$TRAIN" "${GPT[@]}" --parallel pp --ckpt-dir "$T/pp"
run "$MPIEXEC" -n 2 "$TRAIN" "${GPT[@]}" --parallel tp --ckpt-dir "$T/tp"
run "$MPIEXEC" -n 2 "$TRAIN" "${GPT[@]}" --parallel tp --precision bf16 --ckpt-dir "$T/tpbf16"

# 1. inspect: the role of every dataset, against what the file holds (h5py): /model the weights
#    (bf16 words in a bf16 run), /optimizer/<p>/master fp32 copies of bf16 weights, the other slots
#    AdamW's moments, /meta other.
for f in none/$S.h5 bf16/$S.h5 dp/$S.h5 pp/$S/rank-0.h5 pp/$S/rank-1.h5 tp/$S/rank-1.h5 tpbf16/$S/rank-0.h5; do
  run "$FLIP" inspect "$T/$f" --json
  cp "$T/stdout" "$T/inspect.json"
  "$PY" - "$T/$f" "$T/inspect.json" <<'PYEOF' || fail "roles of $f"
import h5py, json, sys
path, listing = sys.argv[1], json.load(open(sys.argv[2]))
roles = {d["dataset"]: d["role"] for d in listing["datasets"]}
with h5py.File(path) as f:
    bf16 = json.loads(f["meta"].attrs["config"])["gpt"]["precision"] == "bf16"
    expected = {}
    def visit(name, o):
        if not isinstance(o, h5py.Dataset):
            return
        p = "/" + name
        if p.startswith("/model/"):
            assert (o.attrs.get("resil_dtype") == "bf16") == bf16, (p, dict(o.attrs))
            expected[p] = "model"
        elif p.startswith("/optimizer/"):
            slot = p.rsplit("/", 1)[1]
            assert slot in ("exp_avg", "exp_avg_sq", "master"), p
            if slot == "master":  # the fp32 copy of a bf16 weight of the same shape
                w = f["model/" + p[len("/optimizer/"):].rsplit("/", 1)[0]]
                assert bf16 and o.dtype == "float32" and o.shape == w.shape, p
            expected[p] = "master" if slot == "master" else "optimizer"
        else:
            expected[p] = "other"
    f.visititems(visit)
assert roles == expected, {p: (roles.get(p), r) for p, r in expected.items() if roles.get(p) != r}
assert ("master" in roles.values()) == bf16, sorted(set(roles.values()))
PYEOF
done

# 2. --role selects each role alone: 30 flips each into the bf16 checkpoint.
declare -A WANT=([model]='^/model/' [master]='^/optimizer/.*/master$' [optimizer]='^/optimizer/.*/exp_avg(_sq)?$')
for role in model master optimizer; do
  run "$FLIP" inject "$T/bf16/$S.h5" -o "$T/$role.h5" --role "$role" --flips 30 --seed 4 --log "$T/$role.jsonl"
  "$PY" - "$T/$role.jsonl" "${WANT[$role]}" "$role" <<'PYEOF' || fail "--role $role"
import re, sys
from resil import results
log = results.read_flip_log(sys.argv[1])
assert len(log.flips) == 30 and log.complete
for fl in log.flips:
    assert re.search(sys.argv[2], fl.dataset), fl.dataset
    assert fl.dtype == ("bf16" if sys.argv[3] == "model" else "f32"), fl
PYEOF
done
# ... and in plan; an fp32 checkpoint has no master weights: one line says so (exit 5).
run "$FLIP" plan "$T/bf16/$S.h5" --role master
# 34,688 parameters, each with a 32-bit master
grep -q "^fault space: 1110016 selected stored bits" "$T/stdout" || { cat "$T/stdout"; fail "plan --role master does not count the fp32 masters"; }
expect_err 5 "matched no tensor (this file's tensors: 28 model, 0 master, 56 optimizer, 1 other" \
  "$FLIP" inject "$T/none/$S.h5" -o "$T/x.h5" --role master --flips 1 --seed 1 --log "$T/x.jsonl"
[ ! -e "$T/x.h5" ] || fail "an empty selection wrote its output"

# 3. tp: flips into both shards of fp32 and bf16 tp checkpoints (every role), each logged element
#    checked in the global tensor.
for d in tp tpbf16; do
  for r in 0 1; do
    cp -r "$T/$d" "$T/$d-flipped-$r"
    run "$FLIP" inject "$T/$d-flipped-$r/$S/rank-$r.h5" --in-place --flips 60 --seed $((11 + r)) --log "$T/$d-$r.jsonl"
    serial=none
    [ "$d" = tpbf16 ] && serial=bf16
    "$PY" - "$T/$d/$S" "$T/$d-flipped-$r/$S" "$r" "$T/$d-$r.jsonl" "$T/$serial/$S.h5" <<'PYEOF' || fail "global indices of $d rank $r"
import h5py, json, sys
import numpy as np
from resil import results
golden_dir, flipped_dir, rank, log_path, serial_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
N, H = 2, 2  # ranks, heads

def rows_of(name, shape, r):
    """Megatron-LM's tp layout (docs/design/gpt.md): (dim, global indices along it) of rank r's slice, or None (whole)."""
    p = name.split("/")[2]  # /model/<p> or /optimizer/<p>/<slot>
    if ".attn.c_attn." in p:  # q, k and v rows of heads r*H/N .. (r+1)*H/N - 1
        C = shape[0] // 3
        part = np.arange(r * C // N, (r + 1) * C // N)
        return 0, np.concatenate([part, C + part, 2 * C + part])
    if ".mlp.c_fc." in p:  # rows r*4C/N ..
        return 0, np.arange(r * shape[0] // N, (r + 1) * shape[0] // N)
    if p.endswith(".c_proj.weight"):  # the matching input columns
        return 1, np.arange(r * shape[1] // N, (r + 1) * shape[1] // N)
    return None

def words(a):
    return a.view(np.uint16 if a.dtype in (np.uint16, np.float16) else np.uint32)

log = results.read_flip_log(log_path)
assert log.complete and len(log.flips) == 60
seen_global = seen_whole = 0
with h5py.File(serial_path) as serial:
    shards = [[h5py.File(f"{d}/rank-{i}.h5") for i in range(N)] for d in (golden_dir, flipped_dir)]
    for fl in log.flips:
        g_shape = serial[fl.dataset].shape
        layout = rows_of(fl.dataset, g_shape, rank)
        if layout is None:  # whole on every rank: no global index, the local one is the global one
            assert fl.global_index is None and fl.global_nd is None and fl.global_shape is None, fl
            assert shards[0][rank][fl.dataset].shape == g_shape
            seen_whole += 1
            continue
        seen_global += 1
        assert fl.global_shape == list(g_shape), (fl, g_shape)
        assert fl.global_index == int(np.ravel_multi_index(fl.global_nd, g_shape)), fl
        # The global tensor before and after, put together from the golden shards and from the
        # shards with this rank's file flipped.
        for which, want in ((0, "old"), (1, "new")):
            whole = None
            for i in range(N):
                ds = (shards[1] if which else shards[0])[i][fl.dataset] if i == rank else shards[0][i][fl.dataset]
                local = ds[()]
                if whole is None:
                    whole = np.zeros(g_shape, local.dtype)
                dim, idx = rows_of(fl.dataset, g_shape, i)
                whole[(slice(None),) * dim + (idx,)] = local
            w = int(words(whole)[tuple(fl.global_nd)])
            # the first flip of a word holds its old bits, the last its new ones
            chain = [c for c in log.flips if c.dataset == fl.dataset and c.index == fl.index]
            assert w == (chain[0].old if want == "old" else chain[-1].new), (fl, want, hex(w))
        # and the local element is the one the log names
        assert int(words(shards[1][rank][fl.dataset][()])[tuple(fl.nd)]) == [c for c in log.flips if c.dataset == fl.dataset and c.index == fl.index][-1].new
assert seen_global > 20 and seen_whole > 0, (seen_global, seen_whole)
PYEOF
  done
done

# 4. A resil_tp_slice that does not describe its dataset is refused before anything is written.
cp -r "$T/tp" "$T/tp-bad"
"$PY" - "$T/tp-bad/$S/rank-1.h5" <<'PYEOF'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f["model/h.0.mlp.c_fc.weight"].attrs["resil_tp_slice"] = '{"dim":0,"global_shape":[128,32],"ranges":[[0,32]]}'
PYEOF
before=$(sha "$T/tp-bad/$S/rank-1.h5")
expect_err 4 "h.0.mlp.c_fc.weight: resil_tp_slice describes a slice of shape .32,32., not the dataset's .64,32." \
  "$FLIP" inject "$T/tp-bad/$S/rank-1.h5" --in-place --include '/model/h.0.mlp.c_fc.weight' --flips 1 --seed 1 --log "$T/bad.jsonl"
[ "$(sha "$T/tp-bad/$S/rank-1.h5")" = "$before" ] || fail "a refused injection changed the shard"
echo "ckpt-flip on gpt checkpoints: roles, --role, tp global indices: ok"
