#!/usr/bin/python3
"""A PyTorch user's training script, the trial command of a ckpt-flip campaign on a .pt checkpoint.

A small CNN with BatchNorm, trained with Adam on Fashion-MNIST read from Debian's IDX files
(dataset-fashion-mnist), CPU only, deterministic: the same seed and arguments give bit-identical
checkpoints and summaries. The checkpoint is a torch.save file in the common layout
{"model": state_dict, "optimizer": state_dict, "epoch": completed epochs, "seed": s, "args": {...}}.

Exit codes follow resil's (docs/reference/exit-codes.md), so a campaign's defaults classify them:
  0 ok, 1 internal, 2 usage, 3 io (missing/unwritable file),
  4 the checkpoint (or a data file) cannot be read (torch.load fails, damaged IDX file),
  6 NaN/Inf in the training loss, the test loss or the weights,
  7 the checkpoint loads but does not fit this model (keys, shapes, layout).
Errors are one line on stderr, "train.py: error: <what>"; with --out the summary JSON is written
for every outcome but usage errors.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

PROG = "train.py"
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_IO, EXIT_CORRUPT, EXIT_NUMERIC, EXIT_MISMATCH = 0, 1, 2, 3, 4, 6, 7
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
MODEL_NAME = "cnn-bn"
MASK64 = (1 << 64) - 1

EPILOG = """examples:
  # train 1 epoch on 2000 images, save the golden checkpoint (seed printed; pass --seed to fix it)
  train.py train --epochs 1 --limit 2000 --seed 7 --save golden.pt
  # resume it to the end of a 2-epoch schedule, evaluate, write the summary (a campaign trial)
  train.py train --from golden.pt --epochs 2 --out trial.json --save final.pt
  # evaluate a checkpoint on the first 1000 test images
  train.py eval --from golden.pt --test-limit 1000 --out eval.json

exit codes: 0 ok, 2 usage, 3 io, 4 checkpoint or data unreadable, 6 NaN/Inf, 7 checkpoint
does not fit the model (docs/reference/exit-codes.md). --out is written for every outcome but 2.
"""


class Failure(Exception):
    """An expected failure: its message is the one stderr line, its code the exit code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class NonFinite(Failure):
    def __init__(self, message, step=None):
        super().__init__(EXIT_NUMERIC, message)
        self.step = step


# ---------------------------------------------------------------------------------------------
# Data: IDX files (plain or gzip), read only as far as the samples kept.

def read_idx(path, count):
    """The first `count` items (None: all) of a u8 IDX file, as (dims, bytes)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] != 0x08 or not 1 <= head[3] <= 4:
                raise Failure(EXIT_CORRUPT, f"{path}: not a u8 IDX file (magic {head.hex()})")
            raw = f.read(4 * head[3])
            if len(raw) < 4 * head[3]:
                raise Failure(EXIT_CORRUPT, f"{path}: truncated IDX header")
            dims = list(struct.unpack(f">{head[3]}I", raw))
            n = dims[0] if count is None else min(count, dims[0])
            item = math.prod(dims[1:])
            data = f.read(n * item)
            if len(data) < n * item:
                raise Failure(EXIT_CORRUPT, f"{path}: truncated IDX payload ({len(data)} of {n * item} bytes)")
    except (OSError, EOFError, gzip.BadGzipFile) as e:  # BadGzipFile is an OSError; EOFError: cut gzip stream
        if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise Failure(EXIT_IO, f"{path}: {e.strerror}")
        raise Failure(EXIT_CORRUPT, f"{path}: {e}")
    return [n] + dims[1:], data


def find_split(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise Failure(EXIT_IO, f"{os.path.join(data_dir, stem)}[.gz]: no such file")


def load_split(torch, data_dir, split, limit):
    prefix = "train" if split == "train" else "t10k"
    ipath = find_split(data_dir, f"{prefix}-images-idx3-ubyte")
    lpath = find_split(data_dir, f"{prefix}-labels-idx1-ubyte")
    idims, images = read_idx(ipath, limit)
    ldims, labels = read_idx(lpath, limit)
    if idims[1:] != [28, 28] or len(ldims) != 1 or idims[0] != ldims[0]:
        raise Failure(EXIT_CORRUPT, f"{ipath}: expected N x 28 x 28 images matching {lpath}")
    x = torch.frombuffer(bytearray(images), dtype=torch.uint8).reshape(idims[0], 1, 28, 28)
    y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
    if idims[0] and int(y.max()) > 9:
        raise Failure(EXIT_CORRUPT, f"{lpath}: label outside 0..9")
    return (x.float() / 255.0 - 0.2860) / 0.3530, y


# ---------------------------------------------------------------------------------------------
# Model, schedule, checkpoint.

def build(torch, seed, lr):
    """The model (kept tiny: a trial is a few seconds on one core) and its optimizer."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):  # named layers: tensors in reports read model/bn1.running_var, not model/1.running_var
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.fc1, self.fc2 = nn.Linear(16 * 7 * 7, 32), nn.Linear(32, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
            return self.fc2(F.relu(self.fc1(x.flatten(1))))

    torch.manual_seed(seed)
    model = Net()
    return model, torch.optim.Adam(model.parameters(), lr=lr)


def epoch_seed(seed, epoch):
    """SplitMix64 of (seed, epoch): the shuffle of an epoch is a pure function of both, so a resumed
    run sees the order an uninterrupted one did, with no generator state in the checkpoint."""
    z = (seed + (epoch + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return (z ^ (z >> 31)) & ((1 << 63) - 1)


def atomic_write(path, write):
    """write(tmp) then rename: a failed or interrupted run leaves no partial file at `path`. The
    directory is made when missing (out/pytorch/ in a fresh clone)."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp.{os.getpid()}")
    try:
        os.makedirs(folder, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise Failure(EXIT_IO, f"{path}: {e.strerror or e}")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_checkpoint(torch, path, model, opt, epoch, seed, args):
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "seed": seed,
             "args": args}
    atomic_write(path, lambda tmp: save_to(torch, state, tmp))


def save_to(torch, state, path):
    # Through a file object the zip's top folder is "archive" whatever the file name (given a path,
    # torch names it after the file): same state, same bytes, under any name.
    with open(path, "wb") as f:
        torch.save(state, f)


def check_readable(path):
    """Before torch is imported (a second or more): a missing input fails at once."""
    if not os.path.exists(path):
        raise Failure(EXIT_IO, f"{path}: no such file")
    if not os.path.isfile(path):
        raise Failure(EXIT_IO, f"{path}: not a regular file")


def load_checkpoint(torch, path):
    check_readable(path)
    try:
        # weights_only would be the safe loader, but torch 1.13 has none: the file is the user's own.
        ck = torch.load(path, map_location="cpu")
    except (PermissionError, IsADirectoryError) as e:
        raise Failure(EXIT_IO, f"{path}: {e.strerror}")
    except Exception as e:  # torch.load raises RuntimeError, UnpicklingError, EOFError, ...; all mean unreadable
        raise Failure(EXIT_CORRUPT, f"{path}: torch.load cannot read it: {one_line(e)}")
    keys = ("model", "optimizer", "epoch", "seed", "args")
    if not isinstance(ck, dict) or any(k not in ck for k in keys):
        raise Failure(EXIT_MISMATCH, f"{path}: not a checkpoint of this script (expected a dict with {', '.join(keys)})")
    a = ck["args"]
    if not (isinstance(ck["epoch"], int) and isinstance(ck["seed"], int) and isinstance(a, dict)
            and all(isinstance(a.get(k), int) for k in ("limit", "batch_size"))):
        raise Failure(EXIT_MISMATCH, f"{path}: epoch, seed, args.limit and args.batch_size must be integers")
    return ck


def restore(torch, path, ck, model, opt):
    try:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError) as e:
        raise Failure(EXIT_MISMATCH, f"{path}: does not fit the {MODEL_NAME} model: {one_line(e)}")
    # Adam's moments must have their parameter's shape: load_state_dict does not check it.
    for p in model.parameters():
        for name, v in opt.state.get(p, {}).items():
            if torch.is_tensor(v) and v.dim() > 0 and v.shape != p.shape:
                raise Failure(EXIT_MISMATCH, f"{path}: optimizer {name} has shape {list(v.shape)}, parameter {list(p.shape)}")


def first_nonfinite(torch, model):
    """The name of the first weight or buffer (BatchNorm statistics) holding NaN/Inf, else None.
    Optimizer state is not checked: what it does to the weights shows in the loss and the weights."""
    for name, t in model.state_dict().items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return f"model/{name}"
    return None


# ---------------------------------------------------------------------------------------------
# Train and evaluate.

def train_epochs(torch, model, opt, x, y, seed, first, last, batch, summary):
    """Epochs first..last-1; every batch full (the last incomplete one is dropped). Stops at the
    first non-finite loss; steps counted from the start of the schedule."""
    F = torch.nn.functional
    steps_per_epoch = x.shape[0] // batch
    model.train()
    summary["steps"] = first * steps_per_epoch
    for epoch in range(first, last):
        order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(epoch_seed(seed, epoch)))
        total = 0.0
        for s in range(steps_per_epoch):
            step = epoch * steps_per_epoch + s
            idx = order[s * batch:(s + 1) * batch]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            value = loss.item()
            if not math.isfinite(value):
                raise NonFinite(f"loss is {value} at step {step} (epoch {epoch})", step)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += value
            summary["steps"] = step + 1
        summary["final_loss"] = total / steps_per_epoch if steps_per_epoch else None
        summary["epochs_trained"] += 1


def evaluate(torch, model, x, y):
    F = torch.nn.functional
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 500):
            out = model(x[i:i + 500])
            loss_sum += F.cross_entropy(out, y[i:i + 500], reduction="sum").item()
            correct += int((out.argmax(1) == y[i:i + 500]).sum())
    n = max(x.shape[0], 1)
    return loss_sum / n, correct / n


def run(torch, a, summary):
    seed = a.seed
    if a.from_ckpt:
        ck = load_checkpoint(torch, a.from_ckpt)
        seed, limit, batch = ck["seed"], ck["args"]["limit"], ck["args"]["batch_size"]
        start = ck["epoch"]
        verb = "resuming" if a.command == "train" else "evaluating"
        print(f"{PROG}: {verb} {a.from_ckpt} at epoch {start} (seed {seed}, limit {limit}, batch {batch})", flush=True)
    else:
        limit, batch, start = a.limit, a.batch_size, 0
    summary.update(seed=seed, start_epoch=start)
    print(f"{PROG}: seed {seed}", flush=True)
    model, opt = build(torch, seed, a.lr)
    if a.from_ckpt:
        restore(torch, a.from_ckpt, ck, model, opt)
        if a.command == "eval":
            bad = first_nonfinite(torch, model)
            if bad:
                summary["nan_detected"] = True
                raise NonFinite(f"{a.from_ckpt}: {bad} holds NaN/Inf")
    if a.command == "train":
        if start > a.epochs:
            raise Failure(EXIT_MISMATCH, f"{a.from_ckpt}: already at epoch {start}, beyond --epochs {a.epochs}")
        x, y = load_split(torch, a.data, "train", limit)
        if x.shape[0] < batch:
            raise Failure(EXIT_USAGE, f"--limit {limit} is less than one batch ({batch})")
        summary.update(train_samples=int(x.shape[0]), epochs=a.epochs)
        train_epochs(torch, model, opt, x, y, seed, start, a.epochs, batch, summary)
        bad = first_nonfinite(torch, model)
        if bad:
            if not summary["epochs_trained"]:
                raise NonFinite(f"{a.from_ckpt}: {bad} holds NaN/Inf")
            last = summary["steps"] - 1
            raise NonFinite(f"{bad} holds NaN/Inf at the end of training (step {last})", last)
        if a.save:
            save_checkpoint(torch, a.save, model, opt, a.epochs, seed, {"limit": limit, "batch_size": batch})
            summary["last_checkpoint"] = os.path.abspath(a.save)
            print(f"{PROG}: saved {a.save} (epoch {a.epochs})", flush=True)
    tx, ty = load_split(torch, a.data, "test", a.test_limit or None)
    test_loss, acc = evaluate(torch, model, tx, ty)
    summary.update(test_samples=int(tx.shape[0]), test_loss=test_loss, test_accuracy=acc)
    print(f"{PROG}: test loss {test_loss:.6f}, accuracy {acc:.4f} on {tx.shape[0]} images", flush=True)
    if not math.isfinite(test_loss):
        raise NonFinite(f"test loss is {test_loss}")


# ---------------------------------------------------------------------------------------------
# Command line.

def one_line(e):
    text = " ".join(str(e).split())
    return text[:300] if text else type(e).__name__


def seed_arg(s):
    v = int(s, 0)
    if not 0 <= v <= MASK64:
        raise argparse.ArgumentTypeError(f"{s} is not in [0, 2^64-1]")
    return v


def positive(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{s} is not a positive integer")
    return v


def non_negative(s):
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{s} is negative")
    return v


def finite_positive(s):
    v = float(s)
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"{s} is not a finite positive number")
    return v


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every resil program; --help has the usage
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def parse(argv):
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="{train,eval}")
    t = sub.add_parser("train", help="train from scratch, or resume --from a checkpoint to the end of --epochs",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    e = sub.add_parser("eval", help="evaluate a checkpoint on the test split",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--from", dest="from_ckpt", metavar="CKPT", help="resume from this checkpoint (its seed, limit, batch size)")
    t.add_argument("--epochs", type=non_negative, default=1, help="end of the schedule, in epochs from the start (default 1)")
    t.add_argument("--limit", type=positive, help="train on the first N training images (default 2000)")
    t.add_argument("--batch-size", type=positive, help="images per step (default 50)")
    t.add_argument("--seed", type=seed_arg, help="model init and shuffling (default: drawn once and printed)")
    t.add_argument("--save", metavar="CKPT", help="write the checkpoint at the end of the schedule here")
    e.add_argument("--from", dest="from_ckpt", metavar="CKPT", required=True, help="the checkpoint to evaluate")
    for q in (t, e):
        q.add_argument("--lr", type=finite_positive, default=1e-3, help="Adam learning rate before loading the optimizer state (default 1e-3)")
        q.add_argument("--test-limit", type=non_negative, default=1000, help="evaluate on the first N test images, 0: all 10000 (default 1000)")
        q.add_argument("--data", default=DEFAULT_DATA, help=f"directory of the IDX files (default {DEFAULT_DATA})")
        q.add_argument("--out", metavar="JSON", help="write the summary here, whatever the outcome")
    a = p.parse_args(argv)
    if a.command == "eval":
        a.limit = a.batch_size = a.seed = a.save = None
        a.epochs = None
    if a.from_ckpt is not None:
        for flag, v in (("--limit", a.limit), ("--batch-size", a.batch_size), ("--seed", a.seed)):
            if v is not None:
                p.error(f"{flag} comes from the checkpoint when resuming --from it")
    else:
        a.limit = a.limit or 2000
        a.batch_size = a.batch_size or 50
        if a.seed is None:
            a.seed = int.from_bytes(os.urandom(8), "little")
    paths = [(n, v) for n, v in (("--from", a.from_ckpt), ("--save", a.save), ("--out", a.out)) if v]
    for i, (n1, v1) in enumerate(paths):
        if not v1.strip():
            p.error(f"{n1} must not be empty")
        for n2, v2 in paths[i + 1:]:
            if os.path.realpath(v1) == os.path.realpath(v2):
                p.error(f"{n1} and {n2} name the same file {v1}")
    return a


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def jsonable(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def main(argv):
    a = parse(argv)
    began = time.monotonic()
    summary = {"command": a.command, "model": MODEL_NAME, "from": a.from_ckpt, "seed": a.seed, "start_epoch": 0,
               "epochs": a.epochs, "epochs_trained": 0, "steps": 0, "final_loss": None, "test_loss": None,
               "test_accuracy": None, "test_samples": 0, "nan_detected": False, "nan_step": None,
               "last_checkpoint": None, "exit_code": EXIT_OK, "error": None}
    code = EXIT_OK
    try:
        if a.from_ckpt:
            check_readable(a.from_ckpt)
        import torch
        summary["torch_version"] = torch.__version__
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        torch.use_deterministic_algorithms(True)
        run(torch, a, summary)
    except Failure as f:
        code, summary["error"] = f.code, str(f)
        if isinstance(f, NonFinite):
            summary["nan_detected"], summary["nan_step"] = True, f.step
    except ImportError as e:
        code, summary["error"] = EXIT_INTERNAL, f"cannot import torch: {one_line(e)}"
    except Exception as e:  # a bug or an unexpected library failure: one line, not a traceback
        code, summary["error"] = EXIT_INTERNAL, f"{type(e).__name__}: {one_line(e)}"
    summary["exit_code"] = code
    summary["wall_seconds"] = round(time.monotonic() - began, 3)
    if a.out:
        text = json.dumps({k: jsonable(v) for k, v in summary.items()}, indent=1, allow_nan=False) + "\n"
        try:
            atomic_write(a.out, lambda tmp: write_text(tmp, text))
        except Failure as f:
            if code == EXIT_OK:
                code, summary["error"] = f.code, str(f)
    if summary["error"]:
        print(f"{PROG}: error: {summary['error']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
