"""What resil writes, read into plain Python structures (lists, dicts, dataclasses of numbers and
strings), so a notebook can count, filter and plot without parsing by hand:

    from resil import results
    c = results.read_campaign("out/pytorch/eval")        # campaign.json, golden.json, every shard's records
    rows = results.trials_table(c.records)                # one flat dict per trial: class, group, metric, field, bit, tensor, ...
    rep = results.read_report("out/pytorch/eval/report.json")   # `ckpt-flip report --json`
    log = results.read_flip_log("flips.jsonl")            # `ckpt-flip inject --log`, `ec-train --inject-log`

Formats: docs/reference/flip-log.md, docs/reference/campaign.md. Malformed input raises
FormatError naming the file and line; a torn last line of a results file (a campaign killed while
writing it) is skipped, as ckpt-flip does. Records are checked as `ckpt-flip report` checks them
(trial ids, seed and campaign id against campaign.json, a trial recorded twice differently), so
what these readers count is what the report counts. Files are read as UTF-8, regular files only
(a FIFO would block the reader forever).
"""
import dataclasses
import json
import os
import re
import stat
import struct

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
    """A flip log's value: a number, or "nan", "inf", "-inf" as float (None when absent)."""
    if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return v
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    raise ValueError(f"the value {v!r} is not a number, \"nan\", \"inf\" or \"-inf\"")


def _is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_HEX = re.compile(r"0x[0-9a-fA-F]+")


def _hex(j, key):
    v = j[key]
    if not isinstance(v, str) or not _HEX.fullmatch(v):
        raise ValueError(f"{key!r} {v!r} is not a hex word (0x...)")
    return int(v, 16)


def _ints(v, key):
    if not isinstance(v, list) or not all(_is_uint(x) for x in v):
        raise ValueError(f"{key!r} {v!r} is not a list of integers >= 0")
    return list(v)


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
    """A Flip of a flip log's record or of a campaign record's flip (which names its anchor "bit" and
    lists no "bits": they are the mask's set bits). ValueError/KeyError/TypeError when malformed."""
    if not isinstance(j, dict):
        raise TypeError(f"a flip is a JSON object, not {type(j).__name__}")
    mask, old, new = _hex(j, "mask"), _hex(j, "old"), _hex(j, "new")
    set_bits = [b for b in range(mask.bit_length()) if mask >> b & 1]
    if "bits" in j:
        bits = _ints(j["bits"], "bits")
        if bits != set_bits:
            raise ValueError(f'"bits" {bits} does not list the set bits of the mask {j["mask"]}')
    else:
        bits = set_bits
    if not _is_uint(j["index"]):
        raise ValueError(f'"index" {j["index"]!r} is not an integer >= 0')
    if not isinstance(j["dataset"], str) or not isinstance(j["dtype"], str):
        raise ValueError('"dataset" and "dtype" are strings')
    anchor = j.get("anchor", j.get("bit"))
    if anchor is not None and not _is_uint(anchor):
        raise ValueError(f'the anchor bit {anchor!r} is not an integer >= 0')
    return Flip(seq=j.get("seq", 0), dataset=j["dataset"], index=j["index"], nd=_ints(j.get("nd", [j["index"]]), "nd"), dtype=j["dtype"],
                anchor=anchor, bits=bits, mask=mask, old=old, new=new, old_value=_value(j.get("old_value")),
                new_value=_value(j.get("new_value")), file=j.get("file"), step=j.get("step"), rank=j.get("rank"), target=j.get("target"),
                global_index=j.get("global_index"), global_nd=_list_or_none(j.get("global_nd"), "global_nd"),
                global_shape=_list_or_none(j.get("global_shape"), "global_shape"))


def _list_or_none(v, key):
    return None if v is None else _ints(v, key)


def _kind(mode):
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def _read_bytes(path):
    """The bytes of a regular file. Anything else (a FIFO, which would block the reader forever, a
    directory, a device) is a FormatError naming it; a missing file is the OSError of open()."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # O_NONBLOCK: a FIFO does not block the open
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{path}: is {_kind(st.st_mode)}, not a regular file")
        parts = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(parts)
            parts.append(b)
    finally:
        os.close(fd)


def _no_constant(token):
    raise ValueError(f"{token} is not JSON (resil writes non-finite values as null or as strings)")


def _loads(raw):
    """A JSON value of UTF-8 bytes, as the C++ side reads them: strict JSON (no NaN/Infinity), UTF-8
    only. ValueError (RecursionError: nested too deeply for Python's parser) when it is not."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _jsonl(path):
    """(line number, value) of each non-blank line of a JSONL file. A last line that is not JSON is
    text cut by a kill while it was written (a flip log's record, or a trial that runs again when
    the campaign continues): skipped; any other is a FormatError."""
    lines = _read_bytes(path).split(b"\n")
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            yield n, _loads(raw)
        except ValueError as e:  # UnicodeDecodeError included
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
            if header is None and kind != "header":
                raise FormatError(f"{path}:{n}: the first line must be the header")
            if kind == "header":
                if flips or footer is not None or header is not None:
                    raise FormatError(f"{path}:{n}: a second header")
                if j.get("format") != "resil-flip-log/1":
                    raise FormatError(f"{path}:{n}: not a resil flip log (format {j.get('format')!r})")
                header = j
            elif footer is not None:
                raise FormatError(f"{path}:{n}: {'a second footer' if kind == 'footer' else 'a record after the footer'}")
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
        return _loads(_read_bytes(path))
    except ValueError as e:
        if isinstance(e, FormatError):
            raise
        raise FormatError(f"{path}: not {what}: {e}") from None


# The campaign id of a record: XXH64 of the configuration as campaign.json holds it, without "mode",
# dumped as the C++ side dumps it (nlohmann::json::dump(): compact, keys sorted, UTF-8 as is).
_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = 11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579, 2870177450012600261


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc, v):
    return (_rotl((acc + v * _P2) & _M64, 31) * _P1) & _M64


def _xxh64(b, seed=0):
    n, i = len(b), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64]
        while i + 32 <= n:
            v = [_round(acc, x) for acc, x in zip(v, struct.unpack_from("<4Q", b, i))]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, struct.unpack_from("<Q", b, i)[0]), 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ (struct.unpack_from("<I", b, i)[0] * _P1 & _M64), 23) * _P2 + _P3) & _M64
        i += 4
    for c in b[i:]:
        h = (_rotl(h ^ (c * _P5 & _M64), 11) * _P1) & _M64
    h = (h ^ (h >> 33)) * _P2 & _M64
    h = (h ^ (h >> 29)) * _P3 & _M64
    return h ^ (h >> 32)


def _dump_float(x):
    """A float as nlohmann::json writes it: the shortest digits, fixed notation for a decimal
    point position in (-4, 15], else d.ddde+XX."""
    if x != x or x in (float("inf"), float("-inf")):
        return "null"
    r = repr(x)
    sign, r = ("-", r[1:]) if r.startswith("-") else ("", r)
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    allds = ip + fp
    digits = allds.lstrip("0")
    if not digits.strip("0"):
        return sign + "0.0"
    n = int(exp or 0) + len(ip) - (len(allds) - len(digits))  # the decimal point's position in the digits
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 15:
        return sign + digits + "0" * (n - k) + ".0"
    if 0 < n <= 15:
        return sign + digits[:n] + "." + digits[n:]
    if -4 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + ("-" if e < 0 else "+") + "%02d" % abs(e)


def _dump(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _dump_float(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(_dump(x) for x in v) + "]"
    keys = sorted(v, key=lambda k: k.encode("utf-8", "surrogatepass"))
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _dump(v[k]) for k in keys) + "}"


def campaign_id(config):
    """The id a campaign's records carry in "campaign": XXH64 (hex) of its configuration
    (campaign.json's "config") without "mode"."""
    c = {k: x for k, x in config.items() if k != "mode"}
    return "%016x" % _xxh64(_dump(c).encode("utf-8", "surrogatepass"))


def _json_equal(a, b):
    """Equality of JSON values as the C++ side compares them: numbers by value (1 == 1.0), but a
    boolean is no number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _results_files(campaign_dir):
    """OUT/results' entries named *.jsonl, as ckpt-flip selects them (std::filesystem's extension():
    hidden ".x.jsonl" included, a file named ".jsonl" not), in byte order."""
    d = os.path.join(campaign_dir, "results")
    if not os.path.isdir(d):
        return []
    names = [n for n in os.listdir(d) if n.rfind(".") > 0 and n[n.rfind("."):] == ".jsonl"]
    return [os.path.join(d, n) for n in sorted(names, key=lambda n: os.fsencode(n))]


def _meta_limits(campaign_dir):
    """(trials, seed, config) of OUT/campaign.json where it says them (None each otherwise: a
    missing or unreadable campaign.json checks nothing, as ckpt-flip)."""
    path = os.path.join(campaign_dir, "campaign.json")
    try:
        meta = _loads(_read_bytes(path))
    except (OSError, ValueError):
        return None, None, None
    cfg = meta.get("config") if isinstance(meta, dict) else None
    if not isinstance(cfg, dict):
        return None, None, None
    trials, seed = cfg.get("trials"), cfg.get("seed")
    return (trials if _is_uint(trials) else None), (seed if _is_uint(seed) else None), cfg


def _check_types(r, where, t):
    """The fields the readers and the report use, typed as a trial writes them."""
    for key in ("wall_seconds", "cpu_seconds"):
        if key in r and not _is_number(r[key]):
            raise FormatError(f"{where}trial {t}: \"{key}\" {r[key]!r} is not a number")
    if "strata" in r:
        st = r["strata"]
        if not isinstance(st, dict):
            raise FormatError(f"{where}trial {t}: \"strata\" is not an object")
        for k, v in st.items():
            if not isinstance(v, str):
                raise FormatError(f"{where}trial {t}: \"strata\" \"{k}\" {v!r} is not a string")


def read_records(campaign_dir):
    """Every trial record of OUT/results/*.jsonl (all shards), sorted by trial id, checked as
    ckpt-flip checks them (docs/reference/campaign.md, "Records"): a trial id that is not an
    integer in 0..trials-1, an unknown class, a seed or campaign id that is not campaign.json's, or
    the same trial recorded twice with another trial_seed, flips, class or metric is a FormatError
    naming the file and line; the same record twice counts once."""
    trials, seed, cfg = _meta_limits(campaign_dir)
    lines = []
    for path in _results_files(campaign_dir):
        lines.extend((f"{path}:{n}: ", r) for n, r in _jsonl(path))
    # The campaign's id: computed from campaign.json. Should no record carry it (a configuration
    # this dump does not reproduce byte for byte), the records must at least agree among themselves.
    ids = [r.get("campaign") for _, r in lines if isinstance(r, dict) and "campaign" in r]
    want_id = campaign_id(cfg) if cfg is not None else None
    if want_id is not None and ids and want_id not in ids:
        want_id = ids[0]
    by_trial, first_seen = {}, {}
    for where, r in lines:
        if not isinstance(r, dict) or "trial" not in r:
            raise FormatError(f"{where}malformed record: not a trial record")
        t = r["trial"]
        if not _is_uint(t):
            raise FormatError(f"{where}trial id {json.dumps(t)} is not an integer >= 0")
        if trials is not None and t >= trials:
            raise FormatError(f"{where}trial id {t} is outside the campaign's {trials} trials (0..{trials - 1}): not a record of this campaign")
        if r.get("class") not in CLASSES:
            raise FormatError(f"{where}trial {t} has no known outcome class ({json.dumps(r.get('class')) if 'class' in r else 'none'})")
        _check_types(r, where, t)
        if seed is not None and "seed" in r and not (_is_uint(r["seed"]) and r["seed"] == seed):
            raise FormatError(f"{where}trial {t} was drawn with seed {json.dumps(r['seed'])}, this campaign's is {seed}: a record of another campaign")
        if want_id is not None and "campaign" in r and r["campaign"] != want_id:
            raise FormatError(f"{where}trial {t} belongs to campaign {json.dumps(r['campaign'])}, not to this one ({want_id}, from "
                              f"{os.path.join(campaign_dir, 'campaign.json')}): a record of another campaign")
        if t in by_trial:
            for k in ("trial_seed", "flips", "class", "metric"):
                if not _json_equal(by_trial[t].get(k), r.get(k)):
                    raise FormatError(f"{where}trial {t} is recorded again with another \"{k}\" than in {first_seen[t]}: a foreign record, "
                                      f"or a trial that did not repeat; keep one of them")
            continue
        by_trial[t], first_seen[t] = r, where.rstrip(": ")
    return [by_trial[t] for t in sorted(by_trial)]


def read_campaign(campaign_dir):
    """A campaign directory (`ckpt-flip campaign --out DIR`) as a Campaign."""
    meta = _read_json(os.path.join(campaign_dir, "campaign.json"), "a campaign description")
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise FormatError(f"{os.path.join(campaign_dir, 'campaign.json')}: not a campaign description")
    gpath = os.path.join(campaign_dir, "golden.json")
    golden = _read_json(gpath, "a golden record") if os.path.lexists(gpath) else None
    if golden is not None and not isinstance(golden, dict):
        raise FormatError(f"{gpath}: not a golden record")
    return Campaign(dir=campaign_dir, config=meta["config"], space=meta.get("space", {}), golden=golden, records=read_records(campaign_dir))


def _trial_of(r):
    if not isinstance(r, dict) or "trial" not in r:
        raise FormatError(f"not a trial record: {str(r)[:80]}")
    return r["trial"]


def _bit(v):
    return int(v) if isinstance(v, str) and v.isascii() and v.isdigit() else v


def trials_table(records):
    """One flat dict per record, for a table or a DataFrame: trial, class, group, metric,
    golden_metric, delta, stratum, field, bit (int), role, dtype, tensor (of the first flip),
    n_flips, injected_nonfinite, note, wall_seconds, and each further metric's value as
    `metric:<name>` (campaigns with several metrics). Non-finite metrics are None, as recorded.
    A record whose fields are not typed as a campaign writes them is a FormatError naming its trial."""
    rows = []
    for r in records:
        t = _trial_of(r)
        _check_types(r, "", t)
        s = r.get("strata") or {}
        metrics = r.get("metrics") or {}
        if not isinstance(metrics, dict) or not all(isinstance(m, dict) for m in metrics.values()):
            raise FormatError(f"trial {t}: \"metrics\" is not an object of {{value, golden, delta, verdict}} objects")
        row = {"trial": t, "class": r.get("class"), "group": group_of(r.get("class")), "metric": r.get("metric"),
               "golden_metric": r.get("golden_metric"), "delta": r.get("delta"), "stratum": r.get("stratum"), "field": s.get("field"),
               "bit": _bit(s.get("bit")), "role": s.get("role"), "dtype": s.get("dtype"),
               "tensor": s.get("tensor"), "n_flips": r.get("n_flips"), "injected_nonfinite": r.get("injected_nonfinite"),
               "note": r.get("note"), "wall_seconds": r.get("wall_seconds")}
        for name, m in metrics.items():
            row["metric:" + name] = m.get("value")
        rows.append(row)
    return rows


def flips_of(record):
    """The flips of one trial record as Flip objects (`bits`: the set bits of the mask; `anchor`:
    the record's "bit")."""
    t = _trial_of(record)
    flips = record.get("flips", [])
    if not isinstance(flips, list):
        raise FormatError(f"trial {t}: \"flips\" is not a list")
    out = []
    for i, f in enumerate(flips):
        try:
            out.append(_flip(dict(f, seq=i) if isinstance(f, dict) else f))
        except (KeyError, ValueError, TypeError) as e:
            raise FormatError(f"trial {t}: flip {i} is malformed: {e!r}") from None
    return out


def counts(records, by="class"):
    """{value: count} of a record field ("class", or a stratum dimension: "field", "bit" (int keys,
    as trials_table gives them), "role", "dtype", "tensor", or "group")."""
    out = {}
    for r in records:
        t = _trial_of(r)
        _check_types(r, "", t)
        if by == "group":
            key = group_of(r.get("class"))
        elif by == "class":
            key = r.get("class")
        else:
            key = (r.get("strata") or {}).get(by)
            if by == "bit":
                key = _bit(key)
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
    if level not in ("groups", "classes"):
        raise ValueError(f"level {level!r}: \"groups\" or \"classes\"")
    out = {}
    try:
        for name, r in report["overall"][level].items():
            lo, hi = r["clopper_pearson"]
            out[name] = (r["p"], lo, hi)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise FormatError(f"not a campaign report's overall {level}: {e!r}") from None
    return out
