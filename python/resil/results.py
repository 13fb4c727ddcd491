"""What resil writes, read into plain Python structures (lists, dicts, dataclasses of numbers and
strings), so a notebook can count, filter and plot without parsing by hand:

    from resil import results
    c = results.read_campaign("out/pytorch/eval")        # campaign.json, golden.json, every shard's records
    rows = results.trials_table(c.records)                # one flat dict per trial: class, group, metric, field, bit, tensor, ...
    rep = results.read_report("out/pytorch/eval/report.json")   # `ckpt-flip report --json`
    log = results.read_flip_log("flips.jsonl")            # `ckpt-flip inject --log`, `ec-train --inject-log`

Formats: docs/reference/flip-log.md, docs/reference/campaign.md. Malformed input raises
FormatError naming the file and line; a torn last line of a results file (a campaign killed while
writing it) is skipped, as ckpt-flip does.
"""
import dataclasses
import glob
import json
import os

# The outcome classes and their groups (docs/reference/campaign.md, "Classes").
GROUPS = {
    "sdc": ("critical_sdc", "tolerable_sdc"),
    "due": ("load_failure", "hang", "crash", "nan_at_load", "nan_later", "detected"),
    "masked_any": ("masked", "bit_masked"),
    "unknown": ("unreadable_summary",),
}
CLASSES = tuple(c for members in GROUPS.values() for c in members)


class FormatError(ValueError):
    """Input that is not what resil writes: the message names the file (and line)."""


def group_of(cls):
    """The group of an outcome class ("sdc", "due", "masked_any", "unknown")."""
    for g, members in GROUPS.items():
        if cls in members:
            return g
    raise FormatError(f"{cls!r} is not an outcome class ({', '.join(CLASSES)})")


def _value(v):
    """A flip log's value: a number, or "nan", "inf", "-inf" as float."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


# ---------------------------------------------------------------------------------------------
# Flip logs

@dataclasses.dataclass
class Flip:
    """One record of a flip log: the stored word `old` became `new` (`mask` = old ^ new; bit 0 is the LSB)."""
    seq: int
    dataset: str
    index: int
    nd: list
    dtype: str
    anchor: int
    bits: list
    mask: int
    old: int
    new: int
    old_value: object = None  # float (nan and inf included) for floating dtypes; None otherwise
    new_value: object = None
    file: str = None          # the shard file, in a campaign record of an mp checkpoint
    step: int = None          # an ec-train --inject log: the step it was flipped at,
    rank: int = None          # the rank whose memory held the word,
    target: str = None        # and the --inject target (row, parity, stripe, mlp, opt)
    # A tp shard's sliced tensor: the element in the global tensor (flat C-order index, N-d index, shape)
    global_index: int = None
    global_nd: list = None
    global_shape: list = None


@dataclasses.dataclass
class FlipLog:
    header: dict
    flips: list
    footer: dict = None       # None: the injection did not finish (a cut log: revert still works)

    @property
    def complete(self):
        return self.footer is not None


def _flip(j):
    return Flip(seq=j.get("seq", 0), dataset=j["dataset"], index=j["index"], nd=list(j.get("nd", [j["index"]])), dtype=j["dtype"],
                anchor=j.get("anchor", j.get("bit")), bits=list(j.get("bits", [])), mask=int(j["mask"], 16), old=int(j["old"], 16),
                new=int(j["new"], 16), old_value=_value(j.get("old_value")), new_value=_value(j.get("new_value")), file=j.get("file"),
                step=j.get("step"), rank=j.get("rank"), target=j.get("target"),
                global_index=j.get("global_index"), global_nd=_list_or_none(j.get("global_nd")),
                global_shape=_list_or_none(j.get("global_shape")))


def _list_or_none(v):
    return None if v is None else list(v)


def _jsonl(path):
    """(line number, value) of each non-blank line of a JSONL file. A last line that is not JSON is
    text cut by a kill while it was written (a flip log's record, or a trial that runs again when
    the campaign continues): skipped; any other is a FormatError."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            yield n, json.loads(raw)
        except ValueError as e:
            if n == len(lines):
                return
            raise FormatError(f"{path}:{n}: not JSON: {e}") from None


def read_flip_log(path):
    """A `ckpt-flip inject --log` file (resil-flip-log/1) as a FlipLog of Flip records. Raw
    (`--raw`) records are kept as dicts."""
    header, flips, footer = None, [], None
    for n, j in _jsonl(path):
        kind = j.get("type") if isinstance(j, dict) else None
        try:
            if kind == "header":
                if j.get("format") != "resil-flip-log/1":
                    raise FormatError(f"{path}:{n}: not a resil flip log (format {j.get('format')!r})")
                header = j
            elif kind == "flip":
                flips.append(_flip(j))
            elif kind == "raw":
                flips.append(dict(j))
            elif kind == "footer":
                footer = j
            else:
                raise FormatError(f"{path}:{n}: a record of unknown type {kind!r}")
        except (KeyError, ValueError, TypeError) as e:
            if isinstance(e, FormatError):
                raise
            raise FormatError(f"{path}:{n}: malformed {kind} record: {e!r}") from None
    if header is None:
        raise FormatError(f"{path}: no flip-log header")
    return FlipLog(header=header, flips=flips, footer=footer)


# ---------------------------------------------------------------------------------------------
# Campaigns: records, configuration, golden reference

@dataclasses.dataclass
class Campaign:
    dir: str
    config: dict          # campaign.json's "config" (paths absolute)
    space: dict           # the fault space: {"total_bits", "by": {dim: {stratum: bits}}}
    golden: dict          # golden.json (metric, metrics, final_weights_xxh64, summary), or None before the golden run
    records: list         # one dict per trial, sorted by trial id (docs/reference/campaign.md, "Records")

    @property
    def metrics(self):
        """The metrics the campaign classifies on: [{"name", "higher_is_better", "tolerance"}, ...]."""
        c = self.config
        return c.get("metrics") or [{"name": c.get("metric", "test_accuracy"), "higher_is_better": c.get("higher_is_better", True),
                                     "tolerance": c.get("tolerance", 0.01)}]


def _read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as e:
        raise FormatError(f"{path}: not {what}: {e}") from None


def read_records(campaign_dir):
    """Every trial record of OUT/results/*.jsonl (all shards), sorted by trial id; the same trial
    recorded twice with the same class counts once, with another class is a FormatError."""
    by_trial = {}
    for path in sorted(glob.glob(os.path.join(campaign_dir, "results", "*.jsonl"))):
        for n, r in _jsonl(path):
            if not isinstance(r, dict) or not isinstance(r.get("trial"), int) or r.get("class") not in CLASSES:
                raise FormatError(f"{path}:{n}: not a trial record (trial id and a known class expected)")
            t = r["trial"]
            if t in by_trial:
                if by_trial[t].get("class") != r["class"]:
                    raise FormatError(f"{path}:{n}: trial {t} is recorded again with another class")
                continue
            by_trial[t] = r
    return [by_trial[t] for t in sorted(by_trial)]


def read_campaign(campaign_dir):
    """A campaign directory (`ckpt-flip campaign --out DIR`) as a Campaign."""
    meta = _read_json(os.path.join(campaign_dir, "campaign.json"), "a campaign description")
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise FormatError(f"{os.path.join(campaign_dir, 'campaign.json')}: not a campaign description")
    gpath = os.path.join(campaign_dir, "golden.json")
    golden = _read_json(gpath, "a golden record") if os.path.exists(gpath) else None
    return Campaign(dir=campaign_dir, config=meta["config"], space=meta.get("space", {}), golden=golden, records=read_records(campaign_dir))


def trials_table(records):
    """One flat dict per record, for a table or a DataFrame: trial, class, group, metric,
    golden_metric, delta, stratum, field, bit (int), role, dtype, tensor (of the first flip),
    n_flips, injected_nonfinite, note, wall_seconds, and each further metric's value as
    `metric:<name>` (campaigns with several metrics). Non-finite metrics are None, as recorded."""
    rows = []
    for r in records:
        s = r.get("strata") or {}
        bit = s.get("bit")
        row = {"trial": r["trial"], "class": r["class"], "group": group_of(r["class"]), "metric": r.get("metric"),
               "golden_metric": r.get("golden_metric"), "delta": r.get("delta"), "stratum": r.get("stratum"), "field": s.get("field"),
               "bit": int(bit) if isinstance(bit, str) and bit.isdigit() else bit, "role": s.get("role"), "dtype": s.get("dtype"),
               "tensor": s.get("tensor"), "n_flips": r.get("n_flips"), "injected_nonfinite": r.get("injected_nonfinite"),
               "note": r.get("note"), "wall_seconds": r.get("wall_seconds")}
        for name, m in (r.get("metrics") or {}).items():
            row["metric:" + name] = m.get("value")
        rows.append(row)
    return rows


def flips_of(record):
    """The flips of one trial record as Flip objects."""
    return [_flip(dict(f, seq=i)) for i, f in enumerate(record.get("flips", []))]


def counts(records, by="class"):
    """{value: count} of a record field ("class", or a stratum dimension: "field", "bit", "role", "dtype", "tensor", or "group")."""
    out = {}
    for r in records:
        key = group_of(r["class"]) if by == "group" else r["class"] if by == "class" else (r.get("strata") or {}).get(by)
        out[key] = out.get(key, 0) + 1
    return out


# ---------------------------------------------------------------------------------------------
# Reports

def read_report(path):
    """`ckpt-flip report DIR --json F` as a dict (keys: campaign, golden, trials, overall, by,
    reweighted, space, unreadable_summaries, metrics, timing; docs/reference/campaign.md)."""
    rep = _read_json(path, "a campaign report")
    if not isinstance(rep, dict) or rep.get("format") != "resil-campaign-report/1":
        raise FormatError(f"{path}: not a campaign report (format resil-campaign-report/1)")
    return rep


def rates(report, level="groups"):
    """{name: (rate, lo, hi)} of a report's overall classes or groups, the Clopper-Pearson interval."""
    out = {}
    for name, r in report["overall"][level].items():
        lo, hi = r["clopper_pearson"]
        out[name] = (r["p"], lo, hi)
    return out
