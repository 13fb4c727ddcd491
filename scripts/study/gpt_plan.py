"""The arms of the transformer study (docs/design/study-method.md, "The transformer study"), in the order they run.

ckpt-train's gpt in bf16 with AdamW (bf16 weights, fp32 masters, fp32 moments), trained on the fortunes
text. Every arm is a resume campaign of `ckpt-flip campaign` on one golden checkpoint, or a set of
fault-free resumes (the data-order noise), as in the dp-vs-mp study (scripts/study/plan.py): the same
Arm fields, the same families of width targets, and families of its own (per-bit, per-tensor, K flips
up to 100, three parallel modes).
"""
import collections

MODEL = "gpt"
OPT = "adamw"
EPOCHS = 6          # golden runs: 6 epochs of 100 steps, a checkpoint after each; trials resume to epoch 6
POINT_EPOCH = {"early": 2, "late": 4}   # the checkpoint an injection point names (step 200 or 400 of 600)
RANKS = 2           # dp replicas / pp stages / tp ranks
TEST_LIMIT = 1000   # validation windows (of 64 bytes) every run and trial evaluates
REPLICA_RANK = 1    # the one-replica arm: the faulted state is rank 1's (rank 0 evaluates and saves)
MODES = ("dp", "pp", "tp")
SEEDS = (1, 2, 3)

# The model: 2 blocks, 4 heads, width 128, context 64 (437,760 parameters), batches of 16 windows; 100 steps
# per epoch (1,600 windows); AdamW lr 3e-3, 30 warmup steps, cosine decay to 0.1 lr by step 600; bf16.
GPT = "--layers 2 --heads 4 --width 128 --context 64 --batch 16 --precision bf16"
SCHEDULE = "--lr 3e-3 --warmup 30 --decay-steps 570 --min-lr-ratio 0.1"
RECIPE = f"{GPT} --limit 1600 {SCHEDULE}"
SMOKE_RECIPE = "--layers 2 --heads 2 --width 16 --context 16 --batch 8 --precision bf16 --limit 32 --lr 1e-2"
MODE_OPTIONS = {"dp": "", "pp": "--micro-batches 2", "tp": ""}
LOSS_EVERY = {MODEL: 10}   # about 20 windows of the late point's 200 steps, 40 of the early point's
SMOKE_LOSS_EVERY = 1

METRIC = "test_bpb"        # validation loss in bits per byte, lower is better
# The split's n-gram baselines over every validation byte (ckpt-train prints them; docs/reference/datasets.md)
BIGRAM_BPB, UNIGRAM_BPB = 3.757, 4.786
CRITICAL_BPB = 0.05        # a critical SDC: more than 0.05 bits per byte worse than golden (outside the band)

# bf16 bit layout: sign 15, exponent 7-14 (bit 14 its MSB), mantissa 0-6; fp32: sign 31, exponent 23-30
EXP_MSB = {"bf16": 14, "f32": 30}
NO_MSB_BITS = "0-13,15"    # the model role's bf16 words without the exponent MSB

TARGETS = {
    "primary": {"p": 0.25, "width": 0.10, "why": "uniform-bit rate of a role's campaign: any rate up to 25 % to within 10 points"},
    "bits": {"p": 0.0, "width": 0.17, "why": "per bit: no harmful trial bounds the bit's rate below 17 % (each bit a stratum)"},
    "msb": {"p": 0.50, "width": 0.14, "why": "the exponent MSB's harmful rate, any value, within 14 points"},
    "mode": {"p": 0.25, "width": 0.14, "why": "pp, tp and one-replica dp rates up to 25 % within 14 points"},
    "early": {"p": 0.25, "width": 0.14, "why": "early-point rates up to 25 % within 14 points (paired with the late primary)"},
    "kflip": {"p": 0.50, "width": 0.14, "why": "K-flip rates, any value, within 14 points"},
    "pvf": {"p": 0.0, "width": 0.31, "why": "per tensor: no harmful trial bounds its PVF below 31 % (groups of tensors pool theirs)"},
    "seeds": {"p": 0.10, "width": 0.12, "why": "seeds 2 and 3: rates up to 10 % within 12 points, to see the seed-1 rate recur"},
    "noise": {"content": 0.95, "confidence": 0.95, "why": "the band [min, max] of the fault-free outcomes covers 95 % of their distribution with 95 % confidence"},
}

Arm = collections.namedtuple("Arm", "name kind model mode opt seed point role flips bits n replica family strata")


def _arms(sizes, tensors):
    arms = []
    add = lambda **k: arms.append(Arm(**{**dict(model=MODEL, mode="dp", opt=OPT, seed=1, point="late", role="model", flips=1, bits=None,
                                                 replica=False, family="", strata="none"), **k}))
    # 1. noise: the late band pooled over dp, pp and tp of seed 1; the early band of dp; ulp = bit 0 of one
    #    random bf16 weight (one unit in the last place of a weight the model computes with, for one step: the
    #    next step rewrites it from its master). Bit 0 of a master (2^-23) rarely moves its bf16 rounding in 200
    #    steps, so it would add exact zeros, not the spread of training.
    for mode in MODES:
        add(name=f"noise-ulp-{mode}-late", kind="campaign", mode=mode, bits="0", n=sizes["noise_ulp"], family="noise")
        add(name=f"noise-order-{mode}-late", kind="order", mode=mode, n=sizes["noise_order"], family="noise")
    add(name="noise-ulp-dp-early", kind="campaign", point="early", bits="0", n=sizes["noise_ulp_early"], family="noise")
    add(name="noise-order-dp-early", kind="order", point="early", n=sizes["noise_order_early"], family="noise")
    for seed in SEEDS[1:]:
        add(name=f"noise-ulp-dp-late-s{seed}", kind="campaign", seed=seed, bits="0", n=sizes["noise_ulp_other"], family="noise")
        add(name=f"noise-order-dp-late-s{seed}", kind="order", seed=seed, n=sizes["noise_order_other"], family="noise")
    # 2. primary: one flip uniform over a role's stored bits (bf16 weights, fp32 masters, AdamW moments)
    for role in ("model", "master", "optimizer"):
        add(name=f"dp-{role}-late", kind="campaign", role=role, n=sizes["primary"], family="primary")
    # 3. per bit: each bit position a stratum (equal allocation), per role
    for role, nbits in (("model", 16), ("master", 32), ("optimizer", 32)):
        add(name=f"dp-{role}-late-bits", kind="campaign", role=role, strata="bit", n=nbits * sizes["per_bit"], family="bits")
    # 4. the exponent MSB enriched: bit 14 of a bf16 weight, bit 30 of a master
    add(name="dp-model-late-bit14", kind="campaign", bits="14", n=sizes["msb"], family="msb")
    add(name="dp-master-late-bit30", kind="campaign", role="master", bits="30", n=sizes["msb"], family="msb")
    # 5. dp vs pp vs tp, and the one-replica dp arm (the dp primary's sites in rank 1's state only)
    for role in ("model", "master"):
        for mode in ("pp", "tp"):
            add(name=f"{mode}-{role}-late", kind="campaign", mode=mode, role=role, n=sizes["mode"], family="mode")
        add(name=f"dp1-{role}-late", kind="campaign", role=role, replica=True, n=sizes["mode"], family="mode")
    # 6. early injection (the late primary's sites at step 200)
    for role in ("model", "master", "optimizer"):
        add(name=f"dp-{role}-early", kind="campaign", point="early", role=role, n=sizes["early"], family="early")
    # 7. K flips in the bf16 weights: 1, 10, 100 anywhere, and sparing the exponent MSB (K = 1 anywhere is the primary)
    add(name="dp-model-late-k1-nomsb", kind="campaign", bits=NO_MSB_BITS, n=sizes["kflip"], family="kflip")
    for k in (10, 100):
        add(name=f"dp-model-late-k{k}", kind="campaign", flips=k, n=sizes["kflip"], family="kflip")
        add(name=f"dp-model-late-k{k}-nomsb", kind="campaign", flips=k, bits=NO_MSB_BITS, n=sizes["kflip"], family="kflip")
    # 8. per tensor (PVF): each tensor a stratum, bf16 weights and fp32 masters
    for role in ("model", "master"):
        add(name=f"dp-{role}-late-tensors", kind="campaign", role=role, strata="tensor", n=sizes.get("tensor_trials") or tensors * sizes["per_tensor"],
            family="pvf")
    # 9. training seeds 2 and 3
    for seed in SEEDS[1:]:
        for role in ("model", "master", "optimizer"):
            add(name=f"dp-{role}-late-s{seed}", kind="campaign", seed=seed, role=role, n=sizes["seeds"], family="seeds")
    return arms


def tensor_count(layers):
    """Parameters of a gpt of `layers` blocks: wte, wpe, 12 per block, ln_f weight and bias."""
    return 2 + 12 * layers + 2


# trials_for_width(TARGETS[f]) rounded up to a multiple of 10 (scripts/study/transformer.py plan prints them):
# primary 306, msb 208, mode 160, early 160, kflip 208, seeds 111; per bit 20 (0/20: upper bound 16.8 %); per
# tensor 10 (0/10: 30.8 %). Noise: late 3 x (20 + 15) = 105 pooled, early 60 + 40 = 100 (n >= 93 for 95 % / 95 %).
FULL_SIZES = {"noise_ulp": 20, "noise_order": 15, "noise_ulp_early": 60, "noise_order_early": 40, "noise_ulp_other": 20,
              "noise_order_other": 10, "primary": 310, "per_bit": 20, "msb": 210, "mode": 160, "early": 160, "kflip": 210,
              "per_tensor": 10, "seeds": 120}
SMOKE_SIZES = {"noise_ulp": 2, "noise_order": 2, "noise_ulp_early": 1, "noise_order_early": 1, "noise_ulp_other": 1,
               "noise_order_other": 1, "primary": 3, "per_bit": 1, "msb": 2, "mode": 2, "early": 2, "kflip": 2,
               "per_tensor": 1, "tensor_trials": 6, "seeds": 1}
LAYERS = {"full": 2, "smoke": 2}


def arms(plan, models=None):
    return _arms(FULL_SIZES if plan == "full" else SMOKE_SIZES, tensor_count(LAYERS[plan]))


def goldens(arm_list):
    """The golden runs the arms need: (model, mode, opt, seed), in first-use order."""
    seen = []
    for a in arm_list:
        g = (a.model, a.mode, a.opt, a.seed)
        if g not in seen:
            seen.append(g)
    return seen


def golden_name(model, mode, opt, seed):
    return f"{model}-{mode}-{opt}-s{seed}"


def recipe(plan, mode):
    base = RECIPE if plan == "full" else SMOKE_RECIPE
    return f"{base} {MODE_OPTIONS[mode]}".strip()
