"""The arms of the dp-vs-mp study (docs/design/study-method.md), in the order they run.

Every arm is a resume campaign of `ckpt-flip campaign` on one golden checkpoint, or a set of fault-free
resumes (the data-order noise). Trial counts come from the interval-width targets in TARGETS: the study
method states the targets, `plan` prints the trial counts and the widths they buy, and the report checks
the widths reached.
"""
import collections

EPOCHS = 3          # golden runs: 3 epochs, a checkpoint after each; trials resume to epoch 3
RANKS = 4           # dp ranks / mp stages
TEST_LIMIT = 2000   # test images every run and trial evaluates
REPLICA_RANK = 1    # the one-replica arm: the faulted state is rank 1's (rank 0 evaluates and saves)

# recipe per (model, optimizer): extra `ckpt-train train` options
RECIPES = {
    ("mlp", "adam"): "--limit 40000 --batch 256 --lr 3e-3 --lr-decay 0.5",
    ("cnn", "adam"): "--limit 40000 --batch 64 --lr 3e-3 --lr-decay 0.6",
    ("mlp", "sgdm"): "--limit 40000 --batch 256 --optimizer sgd --momentum 0.9 --lr 0.05 --lr-decay 0.5",
    ("cnn", "sgdm"): "--limit 40000 --batch 64 --optimizer sgd --momentum 0.9 --lr 0.02 --lr-decay 0.6",
}
SMOKE_RECIPE = "--limit 512 --batch 64"
# --loss-every: about 12 windows per epoch (MLP 156 steps/epoch, CNN 625)
LOSS_EVERY = {"mlp": 13, "cnn": 52}
SMOKE_LOSS_EVERY = 2

# Interval-width targets (95 %, Clopper-Pearson, in points of a rate) and the anticipated rates they are
# planned at (the harmful rates of the previous study: model state 0.7-2.7 %, Adam optimizer state 17-20 %).
TARGETS = {
    "primary": {"p": 0.25, "width": 0.10, "why": "uniform-bit rate of a (model, mode, point, role) campaign: any rate up to 25 % to within 10 points"},
    "bit30": {"p": 0.50, "width": 0.10, "why": "bit 30's harmful rate, any value, under 10 points"},
    "kflip": {"p": 0.50, "width": 0.14, "why": "K-flip rates, any value, within 14 points"},
    "replica": {"p": 0.25, "width": 0.14, "why": "one-replica rate up to 25 % within 14 points (paired with the all-replica dp campaign)"},
    "sgdm": {"p": 0.25, "width": 0.12, "why": "SGD-momentum arm up to 25 % within 12 points"},
    "seeds": {"p": 0.10, "width": 0.12, "why": "seeds 2 and 3: rates up to 10 % within 12 points, to see the seed-1 rate recur"},
    "noise": {"content": 0.95, "confidence": 0.95, "why": "the band [min, max] of the fault-free outcomes covers 95 % of their distribution with 95 % confidence"},
}

Arm = collections.namedtuple("Arm", "name kind model mode opt seed point role flips bits n replica family")


def _arms(models, sizes):
    arms = []
    add = lambda **k: arms.append(Arm(**{**dict(mode="dp", opt="adam", seed=1, point="late", role="model", flips=1, bits=None,
                                                 replica=False, family=""), **k}))
    for model in models:
        points = ("early", "late") if model == "mlp" else ("late",)
        # 1. noise: per model and point, dp and mp of seed 1, ulp flips (bit 0 of a random model weight) and data orders
        for point in points:
            for mode in ("dp", "mp"):
                add(name=f"noise-ulp-{model}-{mode}-{point}", kind="campaign", model=model, mode=mode, point=point, bits="0",
                    n=sizes["noise_ulp"], family="noise")
                add(name=f"noise-order-{model}-{mode}-{point}", kind="order", model=model, mode=mode, point=point,
                    n=sizes["noise_order"], family="noise")
        # noise of the other goldens (seeds 2 and 3, SGD with momentum): the band's transfer is checked
        for opt, seed in (("adam", 2), ("adam", 3), ("sgdm", 1)):
            add(name=f"noise-ulp-{model}-dp-late-{opt}-s{seed}", kind="campaign", model=model, opt=opt, seed=seed, bits="0",
                n=sizes["noise_ulp_other"], family="noise")
            add(name=f"noise-order-{model}-dp-late-{opt}-s{seed}", kind="order", model=model, opt=opt, seed=seed,
                n=sizes["noise_order_other"], family="noise")
        # 2. primary: uniform over the role's stored bits, one flip
        for point in points:
            for mode in ("dp", "mp"):
                for role in ("model", "optimizer"):
                    add(name=f"{model}-{mode}-{role}-{point}", kind="campaign", model=model, mode=mode, point=point, role=role,
                        n=sizes["primary"], family="primary")
        # 3. one replica (dp): the same sites as the dp campaign, in rank 1's state only
        for role in ("model", "optimizer"):
            add(name=f"{model}-dp1-{role}-late", kind="campaign", model=model, role=role, replica=True, n=sizes["replica"], family="replica")
        # 4. bit 30 enriched
        add(name=f"{model}-dp-model-late-bit30", kind="campaign", model=model, bits="30", n=sizes["bit30"], family="bit30")
        # 5. K flips anywhere in the model state, and K flips sparing bit 30
        add(name=f"{model}-dp-model-late-k10", kind="campaign", model=model, flips=10, n=sizes["kflip"], family="kflip")
        add(name=f"{model}-dp-model-late-k10-no30", kind="campaign", model=model, flips=10, bits="0-29,31", n=sizes["kflip"], family="kflip")
        # 6. SGD with momentum
        for role in ("model", "optimizer"):
            add(name=f"{model}-dp-{role}-late-sgdm", kind="campaign", model=model, opt="sgdm", role=role, n=sizes["sgdm"], family="sgdm")
        # 7. training seeds 2 and 3
        for seed in (2, 3):
            for role in ("model", "optimizer"):
                add(name=f"{model}-dp-{role}-late-s{seed}", kind="campaign", model=model, seed=seed, role=role, n=sizes["seeds"], family="seeds")
    return arms


# trials_for_width(TARGETS[f]) rounded up to a multiple of 10: primary 306, bit30 402, kflip 208, replica
# 160, sgdm 215, seeds 111 (scripts/study/dp_vs_mp.py plan prints them); noise: 2 x (30 + 20) = 100 per
# model and point, whose [min, max] covers 95 % with confidence 0.963 (n >= 93 is needed)
FULL_SIZES = {"noise_ulp": 30, "noise_order": 20, "noise_ulp_other": 20, "noise_order_other": 10,
              "primary": 310, "replica": 160, "bit30": 410, "kflip": 210, "sgdm": 220, "seeds": 120}
SMOKE_SIZES = {"noise_ulp": 2, "noise_order": 2, "noise_ulp_other": 1, "noise_order_other": 1,
               "primary": 2, "replica": 2, "bit30": 2, "kflip": 2, "sgdm": 2, "seeds": 1}


def arms(plan, models=("mlp", "cnn")):
    return _arms(models, FULL_SIZES if plan == "full" else SMOKE_SIZES)


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
