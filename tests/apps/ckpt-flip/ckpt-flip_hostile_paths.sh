#!/bin/bash
# ckpt-flip path arguments against each other and against things that are not plain files: the same
# file under two names (same path, hard link, symbolic link), directories, /dev/null, FIFOs,
# unreadable, locked and missing files, outputs in missing directories; datasets whose data lives in
# external raw files; flip logs cut by a kill; a failed in-place edit; out-of-range seeds, empty --bits. After every refusal: the
# documented exit code, one error line naming the user's path (never a `.NAME.tmp.PID`), and every
# input byte-identical.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-hostile
FLIP=$1
chmod 755 "$T"  # the permission checks run a command as nobody inside it
# expect_rc CODE cmd...: test_lib's (exit status, one error line), never blocking (a FIFO opened for
# reading waits for a writer forever), and no temporary file named in the message.
EXPECT_TIMEOUT=20
eval "lib_$(declare -f expect_rc)"
expect_rc() {
  lib_expect_rc "$@"
  # (but for a name someone else took, which is the one to remove: "the name .X.tmp.PID ... is taken by")
  if grep '\.tmp\.[0-9]' "$T/stderr" | grep -vq 'is taken by'; then cat "$T/stderr"; fail "the message names a temporary file: $*"; fi
}
expect_msg() { grep -q -- "$1" "$T/stderr" || { cat "$T/stderr"; fail "stderr lacks '$1'"; }; }
same() { [ "$(sha "$1")" = "$2" ] || fail "$1 changed ($3)"; }

$PY - "$T" <<'PYEOF'
import sys, os, h5py, numpy as np
T = sys.argv[1]
r = np.random.default_rng(3)
with h5py.File(f"{T}/in.h5", "w") as f:
    f["model/w"] = r.standard_normal((64, 32)).astype("f4")
    f.create_dataset("model/g", data=r.standard_normal((64, 64)).astype("f4"), chunks=(16, 16), compression="gzip")
# External storage: /ext keeps its elements in raw.bin next to the file (h5py `external=`).
for d, seed in (("ext1", 1), ("ext2", 2)):
    os.makedirs(f"{T}/{d}")
    np.random.default_rng(seed).standard_normal(100).astype("f4").tofile(f"{T}/{d}/raw.bin")
    with h5py.File(f"{T}/{d}/ext.h5", "w") as f:
        f.create_dataset("ext", shape=(100,), dtype="f4", external=[("raw.bin", 0, 400)])
        f["inner"] = np.arange(10, dtype="f4")
# A decoy raw.bin in the directory the reading commands run from.
np.zeros(100, "f4").tofile(f"{T}/raw.bin")
PYEOF
IN_SHA=$(sha "$T/in.h5")

# ---- 1. --log and -o aliasing an input, the output or the log being read: exit 2, nothing written.
cp "$T/in.h5" "$T/w.h5"; W_SHA=$(sha "$T/w.h5")
ln "$T/w.h5" "$T/w-hard.h5"; ln -s "$T/w.h5" "$T/w-soft.h5"; ln -s w.h5 "$T/w-rel.h5"
for alias in w.h5 w-hard.h5 w-soft.h5 w-rel.h5 ./w.h5; do
  expect_rc 2 "$FLIP" inject "$T/w.h5" --in-place --seed 1 --flips 3 --log "$T/$alias"; expect_msg "same file"
  same "$T/w.h5" "$W_SHA" "inject --in-place --log $alias"
  expect_rc 2 "$FLIP" inject "$T/w.h5" -o "$T/x.h5" --seed 1 --flips 3 --log "$T/$alias"; expect_msg "\-\-log"
  same "$T/w.h5" "$W_SHA" "inject -o --log $alias"; [ ! -e "$T/x.h5" ] || fail "output left behind"
  expect_rc 2 "$FLIP" inject "$T/w.h5" -o "$T/$alias" --seed 1 --flips 3 --log "$T/l.jsonl"
  same "$T/w.h5" "$W_SHA" "inject -o $alias"; [ ! -e "$T/l.jsonl" ] || fail "log left behind"
done
# -o and --log naming one new file, or one log under two names.
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/o.h5" --seed 1 --flips 3 --log "$T/o.h5"
[ ! -e "$T/o.h5" ] || fail "-o O --log O left a file"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/o.h5" --seed 1 --flips 3 --log "$T/o.jsonl"
O_SHA=$(sha "$T/o.h5"); L_SHA=$(sha "$T/o.jsonl")
ln -s o.jsonl "$T/o-link.jsonl"
# replay T --log L -o L (and its links): the flip log, the only undo record, is kept.
for alias in o.jsonl o-link.jsonl; do
  expect_rc 2 "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$T/$alias"; same "$T/o.jsonl" "$L_SHA" "replay -o $alias"
  expect_rc 2 "$FLIP" replay "$T/$alias" --log "$T/o.jsonl"; same "$T/o.jsonl" "$L_SHA" "replay in place on $alias"
  expect_rc 2 "$FLIP" revert "$T/$alias" --log "$T/o.jsonl"; same "$T/o.jsonl" "$L_SHA" "revert $alias"
done
expect_rc 2 "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$T/in.h5"; same "$T/in.h5" "$IN_SHA" "replay -o IN"
ln -s in.h5 "$T/in-link.h5"
expect_rc 2 "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$T/in-link.h5"; same "$T/in.h5" "$IN_SHA" "replay -o link to IN"
same "$T/o.h5" "$O_SHA" "aliasing checks"
# Distinct paths still work; diff of a file with itself (nothing written) is fine.
expect_rc 0 "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$T/r.h5"; cmp -s "$T/r.h5" "$T/o.h5" || fail "replay -o"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/in-link.h5"; grep -q identical "$T/stdout" || fail "diff of a file with its link"

# In place through a symbolic link, with an edit HDF5 must make (gzip chunks: staged copy and
# rename): the target changes, the link stays a link; revert through it restores the data.
cp "$T/in.h5" "$T/target.h5"; ln -s target.h5 "$T/via-link.h5"
expect_rc 0 "$FLIP" inject "$T/via-link.h5" --in-place --include /model/g --seed 3 --flips 4 --log "$T/link.jsonl"
[ -L "$T/via-link.h5" ] || fail "an in-place edit through a symbolic link replaced the link by a file"
cmp -s "$T/target.h5" "$T/in.h5" && fail "the link's target was not changed"
expect_rc 0 "$FLIP" revert "$T/via-link.h5" --log "$T/link.jsonl"
[ -L "$T/via-link.h5" ] || fail "revert through a symbolic link replaced the link by a file"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/target.h5"; grep -q identical "$T/stdout" || fail "revert through a link"
# -o and --log through symbolic links (one to a file, one dangling): written to the targets, the
# links stay links (not replaced by regular files with the targets left alone).
mkdir -p "$T/real"; echo old >"$T/real/out.h5"
ln -s real/out.h5 "$T/out-link.h5"; ln -s real/new.jsonl "$T/log-link.jsonl"
expect_rc 0 "$FLIP" inject "$T/in.h5" -o "$T/out-link.h5" --include /model/w --seed 5 --flips 2 --log "$T/log-link.jsonl"
[ -L "$T/out-link.h5" ] && [ -L "$T/log-link.jsonl" ] || fail "-o/--log through a symbolic link replaced the link"
[ -s "$T/real/new.jsonl" ] || fail "--log through a dangling link did not create its target"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/real/out.h5"; grep -q identical "$T/stdout" && fail "-o through a link: the target was not written"
expect_rc 0 "$FLIP" revert "$T/real/out.h5" --log "$T/real/new.jsonl"
expect_rc 0 "$FLIP" diff "$T/in.h5" "$T/real/out.h5"; grep -q identical "$T/stdout" || fail "-o through a link: the target does not hold the flipped copy"

# ---- 2. Not regular files, missing and unreadable files: exit 3 (io), never blocking.
mkfifo "$T/fifo"; mkdir "$T/dir"
# A character device: as root a private node like /dev/null (an unfixed ckpt-flip run as root
# renames its output onto the node, or removes it after an error: never the system's /dev/null).
dev=(); nul=/dev/null
if [ "$(id -u)" = 0 ] && mknod "$T/null" c 1 3; then dev=("$T/null"); nul=$T/null; fi
for bad in "$T/fifo" "$T/dir" "$nul" "$T/missing.h5"; do
  expect_rc 3 "$FLIP" inspect "$bad"
  expect_rc 3 "$FLIP" scan "$bad"
  expect_rc 3 "$FLIP" diff "$T/in.h5" "$bad"
  expect_rc 3 "$FLIP" diff "$bad" "$T/in.h5"
  expect_rc 3 "$FLIP" inject "$bad" -o "$T/x.h5" --seed 1 --flips 1 --log "$T/x.jsonl"
  expect_rc 3 "$FLIP" inject "$bad" --dry-run --seed 1 --flips 1
  expect_rc 3 "$FLIP" inject "$bad" --in-place --seed 1 --flips 1 --log "$T/x.jsonl"
  expect_rc 3 "$FLIP" revert "$bad" --log "$T/o.jsonl"
  expect_rc 3 "$FLIP" replay "$bad" --log "$T/o.jsonl" -o "$T/x.h5"
  expect_rc 3 "$FLIP" revert "$T/w.h5" --log "$bad"
  expect_rc 3 "$FLIP" replay "$T/w.h5" --log "$bad" -o "$T/x.h5"
  # A pattern table is an input like the others (a FIFO is refused, not read until it hangs).
  expect_rc 3 "$FLIP" inject "$T/in.h5" --dry-run --seed 1 --flips 1 --model "pattern:$bad"; expect_msg "$bad"
  expect_rc 3 "$FLIP" inject "$T/w.h5" --in-place --seed 1 --flips 1 --model "pattern:$bad" --log "$T/x.jsonl"
  expect_rc 3 "$FLIP" plan "$T/in.h5" --model "pattern:$bad"; expect_msg "$bad"
  [ ! -e "$T/x.h5" ] && [ ! -e "$T/x.jsonl" ] || fail "partial output after $bad"
done
# /dev/zero never ends (700 MB read within 5 s, and growing).
( ulimit -v 2000000; expect_rc 3 "$FLIP" inject "$T/in.h5" --dry-run --seed 1 --flips 1 --model pattern:/dev/zero ) || exit 1
expect_msg "/dev/zero: is a character device"
same "$T/w.h5" "$W_SHA" "patterns that are not regular files"
expect_rc 3 "$FLIP" inspect "$T/missing.h5"; expect_msg "missing.h5: no such file"
expect_rc 3 "$FLIP" inspect "$T/fifo"; expect_msg "FIFO"
# Outputs that are not regular files: refused, the device or FIFO left as it was (the device only
# as root: see above).
for bad in "${dev[@]}" "$T/fifo" "$T/dir"; do
  expect_rc 3 "$FLIP" inject "$T/in.h5" -o "$bad" --seed 1 --flips 1 --log "$T/x.jsonl"
  expect_rc 3 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --log "$bad"
  expect_rc 3 "$FLIP" inject "$T/w.h5" --in-place --seed 1 --flips 1 --log "$bad"
  expect_rc 3 "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$bad"
  [ ! -e "$T/x.h5" ] && [ ! -e "$T/x.jsonl" ] || fail "partial output with $bad"
done
[ ${#dev[@]} = 0 ] || [ -c "$T/null" ] || fail "the device node was replaced"
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
same "$T/w.h5" "$W_SHA" "non-regular outputs"
# An output in a missing directory: exit 3 naming the user's path, and an existing log of the same
# name elsewhere is not removed.
cp "$T/o.jsonl" "$T/keep.jsonl"
expect_rc 3 "$FLIP" inject "$T/in.h5" -o "$T/nodir/out.h5" --seed 1 --flips 1 --log "$T/keep.jsonl"; expect_msg "nodir/out.h5"
cmp -s "$T/keep.jsonl" "$T/o.jsonl" || fail "a failed inject -o removed the existing log"
expect_rc 3 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --log "$T/nodir/x.jsonl"; expect_msg "nodir/x.jsonl"
[ ! -e "$T/x.h5" ] || fail "output left behind when the log cannot be written"
expect_rc 3 "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$T/nodir/out.h5"; expect_msg "nodir/out.h5"
# Unreadable input (as nobody when run as root: root reads everything): exit 3, permission denied.
as_nobody=()
if [ "$(id -u)" = 0 ]; then as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
cp "$T/in.h5" "$T/secret.h5"; chmod 600 "$T/secret.h5"
[ "$(id -u)" = 0 ] || chmod 000 "$T/secret.h5"
expect_rc 3 "${as_nobody[@]}" "$FLIP" inspect "$T/secret.h5"; expect_msg "permission denied"
expect_rc 3 "${as_nobody[@]}" "$FLIP" diff "$T/secret.h5" "$T/in.h5"; expect_msg "permission denied"
expect_rc 3 "${as_nobody[@]}" "$FLIP" inject "$T/secret.h5" -o "$T/dir/x.h5" --seed 1 --flips 1 --log "$T/dir/x.jsonl"; expect_msg "permission denied"
# An output in a directory the user may not write: exit 3 naming the output, not its temporary.
mkdir "$T/ro" "$T/rw"; chmod 555 "$T/ro"; chmod 777 "$T/rw"
if [ "$(id -u)" != 0 ] || [ ${#as_nobody[@]} -gt 0 ]; then
  expect_rc 3 "${as_nobody[@]}" "$FLIP" inject "$T/in.h5" -o "$T/ro/out.h5" --seed 1 --flips 1 --log "$T/rw/x.jsonl"; expect_msg "ro/out.h5"
  expect_rc 3 "${as_nobody[@]}" "$FLIP" inject "$T/in.h5" -o "$T/rw/out.h5" --seed 1 --flips 1 --log "$T/ro/x.jsonl"; expect_msg "ro/x.jsonl"
  expect_rc 3 "${as_nobody[@]}" "$FLIP" replay "$T/in.h5" --log "$T/o.jsonl" -o "$T/ro/out.h5"; expect_msg "ro/out.h5"
  [ -z "$(find "$T/ro" "$T/rw" -mindepth 1)" ] || fail "outputs left behind: $(find "$T/ro" "$T/rw" -mindepth 1)"
  # A read-only input modified in place: exit 3, unchanged.
  cp "$T/in.h5" "$T/rw/ro-in.h5"; chmod 444 "$T/rw/ro-in.h5"
  expect_rc 3 "${as_nobody[@]}" "$FLIP" inject "$T/rw/ro-in.h5" --in-place --seed 1 --flips 1 --log "$T/rw/y.jsonl"
  expect_rc 3 "${as_nobody[@]}" "$FLIP" revert "$T/rw/ro-in.h5" --log "$T/o.jsonl"
  same "$T/rw/ro-in.h5" "$IN_SHA" "read-only input"
  # A staged in-place edit (gzip chunks) of a file the user may write, in a directory the user may
  # not: exit 3, the file unchanged, and no flip log of flips never made (a log complete but for
  # its footer would read as flips made). The message names the temporary copy that could not be created (not
  # "FILE: cannot create"), so test_lib's check is used, not the one against temporary names.
  mkdir "$T/ro2"; cp "$T/in.h5" "$T/ro2/mine.h5"
  if [ "$(id -u)" = 0 ]; then chown 65534 "$T/ro2/mine.h5"; fi
  chmod 555 "$T/ro2"
  lib_expect_rc 3 "${as_nobody[@]}" "$FLIP" inject "$T/ro2/mine.h5" --in-place --include /model/g --seed 1 --flips 2 --log "$T/rw/l8.jsonl"
  expect_msg "ro2/mine.h5: its staged copy .*ro2/\.mine\.h5\.tmp\.[0-9]*: cannot create"
  [ ! -e "$T/rw/l8.jsonl" ] || fail "a failed in-place inject left its flip log"
  same "$T/ro2/mine.h5" "$IN_SHA" "a staged in-place edit that could not create its copy"
  chmod 755 "$T/ro2"  # removable at exit when not run as root
fi
# A file another process holds open for writing (HDF5's file lock): exit 3, "locked".
$PY - "$FLIP" "$T" <<'PYEOF' || fail "locked file"
import sys, subprocess, h5py
flip, T = sys.argv[1:]
with h5py.File(f"{T}/w.h5", "a"):
    for args in (["inspect", f"{T}/w.h5"], ["inject", f"{T}/w.h5", "--in-place", "--seed", "1", "--flips", "1", "--log", f"{T}/lk.jsonl"]):
        p = subprocess.run([flip] + args, capture_output=True, text=True)
        assert p.returncode == 3, (args, p.returncode, p.stderr)
        assert "locked" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
PYEOF
cp "$T/in.h5" "$T/w.h5"; W_SHA=$(sha "$T/w.h5")

# ---- 3. External raw data files: never written; read next to the HDF5 file, not in the cwd.
E=$T/ext1; RAW_SHA=$(sha "$E/raw.bin"); EXT_SHA=$(sha "$E/ext.h5")
expect_rc 0 "$FLIP" inspect "$E/ext.h5"; grep -q "external raw.bin" "$T/stdout" || fail "inspect does not show external storage"
# Run where the raw file is (as h5py users do): HDF5 by itself would find and write it there.
(cd "$E" && expect_rc 5 "$FLIP" inject ext.h5 -o eo.h5 --include /ext --seed 1 --flips 5 --log e.jsonl) || exit 1
(cd "$E" && expect_rc 5 "$FLIP" inject ext.h5 --in-place --include /ext --seed 1 --flips 5 --log e.jsonl) || exit 1
(cd "$E" && expect_rc 0 "$FLIP" inject ext.h5 -o eo.h5 --seed 1 --flips 5 --log "$T/e.jsonl") || exit 1
rm -f "$E/eo.h5" "$E/e.jsonl"
grep -q '"dataset":"/ext"' "$T/e.jsonl" && fail "an external dataset was selected"
same "$E/raw.bin" "$RAW_SHA" "inject -o"; same "$E/ext.h5" "$EXT_SHA" "inject -o"
# A log naming the external dataset (hand-made, or from an older ckpt-flip): refused, exit 4.
$PY - "$T/e.jsonl" "$T/e-ext.jsonl" <<'PYEOF'
import sys, json
lines = [json.loads(l) for l in open(sys.argv[1])]
rec = dict(next(l for l in lines if l["type"] == "flip"), dataset="/ext", index=3, nd=[3])
rec["old"] = "0x%08x" % int.from_bytes(open(sys.argv[1].rsplit("/", 1)[0] + "/ext1/raw.bin", "rb").read()[12:16], "little")
rec["new"] = "0x%08x" % (int(rec["old"], 16) ^ (1 << rec["anchor"]))
rec["mask"] = "0x%08x" % (1 << rec["anchor"]); rec["bits"] = [rec["anchor"]]
rec.pop("old_value", None); rec.pop("new_value", None)
hdr = dict(lines[0], planned=1)
open(sys.argv[2], "w").write(json.dumps(hdr) + "\n" + json.dumps(rec) + "\n")
PYEOF
expect_rc 4 "$FLIP" replay "$E/ext.h5" --log "$T/e-ext.jsonl" -o "$T/eo2.h5"; expect_msg "external"
expect_rc 4 "$FLIP" replay "$E/ext.h5" --log "$T/e-ext.jsonl"
expect_rc 4 "$FLIP" revert "$E/ext.h5" --log "$T/e-ext.jsonl" --force
[ ! -e "$T/eo2.h5" ] || fail "replay -o left an output"
same "$E/raw.bin" "$RAW_SHA" "replay/revert"; same "$E/ext.h5" "$EXT_SHA" "replay/revert"
# Reading from another directory (with a decoy raw.bin there): each file's own raw.bin.
(cd "$T" && expect_rc 0 "$FLIP" diff "$T/ext1/ext.h5" "$T/ext2/ext.h5") || exit 1
grep -q "^/ext  differ" "$T/stdout" || { cat "$T/stdout"; fail "diff did not read each file's own external raw data"; }
(cd / && expect_rc 0 "$FLIP" diff "$T/ext1/ext.h5" "$T/ext1/ext.h5") || exit 1
(cd / && expect_rc 0 "$FLIP" scan "$T/ext1/ext.h5") || exit 1
same "$E/raw.bin" "$RAW_SHA" "diff/scan"
# A raw data file that is missing: exit 3 naming it (it is a missing file, not a damaged HDF5 file);
# inspect still lists the dataset.
mkdir "$T/noraw"; cp "$E/ext.h5" "$T/noraw/"
expect_rc 3 "$FLIP" scan "$T/noraw/ext.h5"; expect_msg "noraw/raw.bin: no such file"
expect_rc 3 "$FLIP" diff "$T/noraw/ext.h5" "$E/ext.h5"; expect_msg "external raw data file"
expect_rc 0 "$FLIP" inspect "$T/noraw/ext.h5"

# ---- 4. Flip logs cut by a kill: nothing to undo before the records are complete (exit 0), the
# records are reverted when only the footer was cut; replay refuses a cut log.
expect_rc 0 "$FLIP" inject "$T/w.h5" -o "$T/inj.h5" --seed 4 --flips 6 --no-hash --log "$T/full.jsonl"
HDR_LEN=$(head -n 1 "$T/full.jsonl" | wc -c)
REC_END=$(( $(head -n 7 "$T/full.jsonl" | wc -c) ))
for cut in 0 1 $((HDR_LEN / 2)) $((HDR_LEN - 1)) $((HDR_LEN + 20)) $((REC_END - 5)); do
  head -c "$cut" "$T/full.jsonl" > "$T/cut.jsonl"
  expect_rc 0 "$FLIP" revert "$T/w.h5" --log "$T/cut.jsonl"; grep -q "nothing to undo" "$T/stdout" || fail "cut at $cut: no 'nothing to undo'"
  same "$T/w.h5" "$W_SHA" "revert of a log cut at $cut"
done
head -c $((HDR_LEN + 20)) "$T/full.jsonl" > "$T/cut.jsonl"
expect_rc 4 "$FLIP" replay "$T/w.h5" --log "$T/cut.jsonl" -o "$T/x.h5"
# A log (made with a hash) cut before its records end says nothing was changed only of its input:
# beside a file that holds its flips (an in-place run whose log was cut afterwards) it is exit 7,
# the file untouched; --force takes the file as untouched.
cp "$T/w.h5" "$T/ip.h5"
expect_rc 0 "$FLIP" inject "$T/ip.h5" --in-place --seed 4 --flips 6 --log "$T/ip.jsonl"
IP_SHA=$(sha "$T/ip.h5")
head -c $(( $(head -n 1 "$T/ip.jsonl" | wc -c) + 20 )) "$T/ip.jsonl" > "$T/ip-cut.jsonl"
expect_err 7 "ip.h5 is not its input" "$FLIP" revert "$T/ip.h5" --log "$T/ip-cut.jsonl"
same "$T/ip.h5" "$IP_SHA" "revert of a cut log beside a flipped file"
cp "$T/w.h5" "$T/ip0.h5"
expect_rc 0 "$FLIP" revert "$T/ip0.h5" --log "$T/ip-cut.jsonl"; grep -q "nothing to undo" "$T/stdout" || fail "the cut log's input: no 'nothing to undo'"
expect_rc 0 "$FLIP" revert "$T/ip.h5" --log "$T/ip-cut.jsonl" --force; grep -q "nothing to undo" "$T/stdout" || fail "--force: no 'nothing to undo'"
same "$T/ip.h5" "$IP_SHA" "revert --force of a cut log"
# Footer cut: all records are there, the file was changed: revert restores it.
head -c $(( $(wc -c < "$T/full.jsonl") - 3 )) "$T/full.jsonl" > "$T/cut.jsonl"
cp "$T/inj.h5" "$T/inj2.h5"
expect_rc 0 "$FLIP" revert "$T/inj2.h5" --log "$T/cut.jsonl"; cmp -s "$T/inj2.h5" "$T/w.h5" || fail "revert with a cut footer"
# A log whose text ends inside a line but is otherwise malformed is still an error.
printf 'garbage\n{"type":"hea' > "$T/bad.jsonl"
expect_rc 4 "$FLIP" revert "$T/w.h5" --log "$T/bad.jsonl"

# ---- 5. Errors met on a temporary copy name the user's file.
expect_rc 0 "$FLIP" inject "$T/w.h5" -o "$T/g.h5" --include /model/g --seed 8 --flips 4 --no-hash --log "$T/g.jsonl"
$PY - "$T/g.jsonl" "$T/g-bad.jsonl" <<'PYEOF'
import sys, json
lines = [json.loads(l) for l in open(sys.argv[1])]
last = max(i for i, l in enumerate(lines) if l["type"] == "flip")
r = lines[last]; b = (r["anchor"] + 1) % 32
r["new"] = "0x%08x" % (int(r["new"], 16) ^ (1 << b)); m = int(r["old"], 16) ^ int(r["new"], 16)
r["mask"] = "0x%08x" % m; r["bits"] = [i for i in range(32) if m >> i & 1]; r["anchor"] = r["bits"][0]
r.pop("old_value", None); r.pop("new_value", None)
open(sys.argv[2], "w").write("".join(json.dumps(l) + "\n" for l in lines))
PYEOF
cp "$T/g.h5" "$T/g2.h5"; G_SHA=$(sha "$T/g2.h5")
expect_rc 7 "$FLIP" revert "$T/g2.h5" --log "$T/g-bad.jsonl"; expect_msg "g2.h5"
same "$T/g2.h5" "$G_SHA" "a revert that failed on its staged copy"
expect_rc 7 "$FLIP" replay "$T/g.h5" --log "$T/g-bad.jsonl" -o "$T/gr.h5"; expect_msg "gr.h5"
[ ! -e "$T/gr.h5" ] || fail "replay -o left an output"
ls -a "$T" | grep -q '\.tmp\.' && fail "temporary files left behind: $(ls -a "$T")"

# ---- 6. Seeds and trial numbers out of range: refused at parse time (exit 2) naming the option.
for s in 18446744073709551616 99999999999999999999999 -1 +5 1e3 " 5" 0x1ffffffffffffffff; do
  expect_rc 2 "$FLIP" inject "$T/in.h5" --dry-run --seed "$s" --flips 1; expect_msg "\-\-seed"
  expect_rc 2 "$FLIP" inject "$T/in.h5" --dry-run --seed 1 --trial "$s" --flips 1; expect_msg "\-\-trial"
done
expect_rc 0 "$FLIP" inject "$T/in.h5" --dry-run --seed 18446744073709551615 --trial 18446744073709551615 --flips 1
grep -q "seed 18446744073709551615, trial 18446744073709551615" "$T/stdout" || fail "largest seed not kept"
expect_rc 0 "$FLIP" inject "$T/in.h5" --dry-run --seed 0x10 --flips 1; grep -q "seed 16," "$T/stdout" || fail "hex seed"
# An empty --bits silently meant every bit.
expect_rc 2 "$FLIP" inject "$T/in.h5" --dry-run --seed 1 --flips 1 --bits ''; expect_msg "\-\-bits"
expect_rc 2 "$FLIP" inject "$T/in.h5" -o "$T/x.h5" --seed 1 --flips 1 --bits '' --log "$T/x.jsonl"; expect_msg "\-\-bits"
[ ! -e "$T/x.h5" ] && [ ! -e "$T/x.jsonl" ] || fail "partial output after --bits ''"
expect_rc 2 "$FLIP" plan "$T/in.h5" --bits ''; expect_msg "\-\-bits"

# ---- 7. Hand-edited and cut logs: records out of seq order, a duplicate, a broken
# chain, a lying footer, a wrong file_format are exit 4 (or 7 for a format the file is not),
# a log cut between whole lines has nothing to undo (revert) and is refused (replay), and an in-place
# replay/revert whose last word mismatches (exit 7) leaves the file unchanged, not with the words
# of the datasets before it already written.
$PY - "$T" <<'PYEOF'
import sys, h5py, numpy as np
T = sys.argv[1]
with h5py.File(f"{T}/two.h5", "w") as f:  # two contiguous datasets: edited in place, word by word
    f["a/w"] = np.array([1.0, 2.0], "f4")
    f["b/w"] = np.arange(1, 5, dtype="f4")  # 8 flips on 6 words: some chain
PYEOF
expect_rc 0 "$FLIP" inject "$T/two.h5" -o "$T/two-b.h5" --seed 1 --flips 8 --bits mantissa --no-hash --log "$T/two.jsonl"
TWO_SHA=$(sha "$T/two.h5"); TWOB_SHA=$(sha "$T/two-b.h5")
$PY - "$T/two.jsonl" "$T" <<'PYEOF'
import sys, json
src, T = sys.argv[1], sys.argv[2]
raw = open(src).read().splitlines(True)
lines = [json.loads(l) for l in raw]
recs = [i for i, l in enumerate(lines) if l["type"] == "flip"]
assert len({lines[i]["dataset"] for i in recs}) == 2, "flips in one dataset only"
def put(name, ls): open(f"{T}/{name}", "w").write("".join(json.dumps(l) + "\n" for l in ls))
def word(r): return (r["dataset"], r["index"])
# 1. Records reversed (seq unchanged), and renumbered too (then the chain of a word breaks, if any).
rev = lines[:1] + [lines[i] for i in reversed(recs)] + lines[recs[-1] + 1:]
put("reversed.jsonl", rev)
renum = [dict(l) for l in rev]
for k, l in enumerate(renum[1:1 + len(recs)]): l["seq"] = k
put("renumbered.jsonl", renum)
# The last record replaced by a copy of the first (count still = planned).
put("dup.jsonl", lines[:recs[-1]] + [lines[recs[0]]] + lines[recs[-1] + 1:])
# A chained word (two records on it): the second's old is not the first's new.
chained = [i for i in recs if sum(word(lines[j]) == word(lines[i]) for j in recs) > 1]
broken = [dict(l) for l in lines]
r = broken[chained[-1]]; o = int(r["old"], 16) ^ 0x4; n = int(r["new"], 16) ^ 0x4
r.update(old="0x%08x" % o, new="0x%08x" % n); r.pop("old_value"); r.pop("new_value")
put("chain.jsonl", broken)
# The footer lying about the words changed; bits that are not the mask's; a format no file has.
put("applied.jsonl", lines[:-1] + [dict(lines[-1], applied=999)])
put("bits.jsonl", [dict(l, bits=[(l["bits"][0] + 1) % 23]) if i == recs[0] else l for i, l in enumerate(lines)])
put("fmt-xyz.jsonl", [dict(lines[0], file_format="xyz")] + lines[1:])
put("fmt-torch.jsonl", [dict(lines[0], file_format="torch")] + lines[1:])
# Cut between two whole lines: the header and 3 of the records, no footer.
open(f"{T}/cut3.jsonl", "w").write("".join(raw[:4]))
# The last record (in the dataset applied last) lies about its old bits (replay) / its new bits
# (revert) while staying self-consistent: every earlier word would be written before it.
last = max(recs, key=lambda i: (lines[i]["dataset"], lines[i]["index"], i))
for name, key in (("lie-old.jsonl", "old"), ("lie-new.jsonl", "new")):
    ls = [dict(l) for l in lines]; r = ls[last]
    if key == "old": r["old"] = "0x00000000"; m = int(r["new"], 16)
    else: r["old"], r["new"] = "0x00000001", "0x00000003"; m = 2
    r["mask"] = "0x%08x" % m; r["bits"] = [b for b in range(32) if m >> b & 1]; r["anchor"] = r["bits"][0]
    r.pop("old_value"); r.pop("new_value")
    ls[-1] = dict(ls[-1]); ls[-1].pop("applied")  # words changed: no longer the injection's
    put(name, ls)
PYEOF
replay_refused() {  # replay_refused LOG MESSAGE: in place and with -o, exit 4, nothing written
  cp "$T/two.h5" "$T/t.h5"
  expect_rc 4 "$FLIP" replay "$T/t.h5" --log "$T/$1"; expect_msg "$2"
  expect_rc 4 "$FLIP" replay "$T/t.h5" --log "$T/$1" -o "$T/t-out.h5"
  [ ! -e "$T/t-out.h5" ] || fail "replay -o with $1 left an output"
  same "$T/t.h5" "$TWO_SHA" "replay with $1"
}
for bad in reversed renumbered dup chain applied bits fmt-xyz; do
  cp "$T/two-b.h5" "$T/t.h5"
  expect_rc 4 "$FLIP" revert "$T/t.h5" --log "$T/$bad.jsonl"; expect_msg "$bad.jsonl:[0-9]"
  same "$T/t.h5" "$TWOB_SHA" "revert with $bad.jsonl"
  replay_refused "$bad.jsonl" "$bad.jsonl:[0-9]"
done
cp "$T/two-b.h5" "$T/t.h5"
expect_rc 7 "$FLIP" revert "$T/t.h5" --log "$T/fmt-torch.jsonl"; expect_msg "torch"
same "$T/t.h5" "$TWOB_SHA" "revert with a log of a torch file"
cp "$T/two-b.h5" "$T/t.h5"
expect_rc 0 "$FLIP" revert "$T/t.h5" --log "$T/cut3.jsonl"; grep -q "nothing to undo" "$T/stdout" || fail "a log cut between lines: no 'nothing to undo'"
same "$T/t.h5" "$TWOB_SHA" "revert of a log cut between lines"
replay_refused cut3.jsonl cut
for io in mapped syscalls; do
  cp "$T/two.h5" "$T/t.h5"
  RESIL_INJECT_WORD_IO=$io expect_rc 7 "$FLIP" replay "$T/t.h5" --log "$T/lie-old.jsonl"
  same "$T/t.h5" "$TWO_SHA" "a failed in-place replay ($io)"
  cp "$T/two-b.h5" "$T/t.h5"
  RESIL_INJECT_WORD_IO=$io expect_rc 7 "$FLIP" revert "$T/t.h5" --log "$T/lie-new.jsonl"
  same "$T/t.h5" "$TWOB_SHA" "a failed in-place revert ($io)"
done
# The whole logs still work both ways.
cp "$T/two.h5" "$T/t.h5"; expect_rc 0 "$FLIP" replay "$T/t.h5" --log "$T/two.jsonl"; same "$T/t.h5" "$TWOB_SHA" "replay"
expect_rc 0 "$FLIP" revert "$T/t.h5" --log "$T/two.jsonl"; same "$T/t.h5" "$TWO_SHA" "revert"

# Another user who may write the directory (a shared sticky one) puts a symbolic link where a run makes its
# temporary, `.NAME.tmp.PID` (the PID is the run's: exec keeps the shell's): a staged in-place edit (a deflated
# .npz), an -o output and the -o run's log. Each run refuses (exit 3, naming the name to remove), the link's target
# (root's 0600 file) and the input are untouched, and the link stays: it is not this user's to remove. A regular
# file of that user's left at a dead PID's temporary name stays too; this user's own, at the run's PID, is replaced.
if [ "$(id -u)" = 0 ]; then
  S="$T/shared"; mkdir -p "$S"; chmod 1777 "$S"
  echo "root's secret" > "$T/victim"; chmod 600 "$T/victim"; VICTIM_SHA=$(sha "$T/victim")
  $PY -c "import numpy as np; np.savez_compressed('$S/att.npz', a=np.arange(40, dtype=np.float32))"
  chown nobody:nogroup "$S/att.npz"; chmod 600 "$S/att.npz"; ATT_SHA=$(sha "$S/att.npz")
  # planted NAME cmd...: NAME.<its pid> made a link to the victim, owned by nobody, then cmd exec'ed (same pid)
  planted="$T/planted.sh"
  printf '%s\n' '#!/bin/bash' 'ln -s "$VICTIM" "$1.$$" && chown -h nobody:nogroup "$1.$$" && shift && exec "$@"' > "$planted"
  chmod +x "$planted"; export VICTIM="$T/victim"
  for what in in-place output log; do
    rm -f "$S"/.*.tmp.* "$S/out.npz" "$T/att.jsonl" "$S/att-o.jsonl"
    case $what in
      in-place) expect_rc 3 "$planted" "$S/.att.npz.tmp" "$FLIP" inject "$S/att.npz" --in-place --seed 5 --flips 1 --log "$T/att.jsonl";;
      output) expect_rc 3 "$planted" "$S/.out.npz.tmp" "$FLIP" inject "$S/att.npz" -o "$S/out.npz" --seed 5 --flips 1 --log "$T/att.jsonl";;
      log) expect_rc 3 "$planted" "$S/.att-o.jsonl.tmp" "$FLIP" inject "$S/att.npz" -o "$S/out.npz" --seed 5 --flips 1 --log "$S/att-o.jsonl";;
    esac
    expect_msg "is taken by a symbolic link (uid 65534)"
    same "$T/victim" "$VICTIM_SHA" "a planted link at the $what temporary"
    [ "$(stat -c %U:%a "$T/victim")" = root:600 ] || fail "the victim's owner or mode changed ($what): $(stat -c %U:%a "$T/victim")"
    same "$S/att.npz" "$ATT_SHA" "a planted link at the $what temporary"
    [ -f "$S/att.npz" ] && [ ! -L "$S/att.npz" ] || fail "att.npz is no longer a regular file ($what)"
    [ "$(find "$S" -maxdepth 1 -name '.*.tmp.*' -type l | wc -l)" = 1 ] || fail "the planted link was removed ($what)"
    [ ! -e "$S/out.npz" ] && [ ! -e "$S/att-o.jsonl" ] || fail "a refused run left its output ($what)"
  done
  rm -f "$S"/.*.tmp.*
  # nobody's regular file at a dead PID's name beside root's file: kept; root's own at the run's PID: replaced.
  cp "$S/att.npz" "$S/root.npz"; chown root:root "$S/root.npz"
  echo theirs > "$S/.root.npz.tmp.4194302"; chown nobody:nogroup "$S/.root.npz.tmp.4194302"
  expect_rc 0 bash -c 'echo stale > "$1.$$" && shift && exec "$@"' own "$S/.root.npz.tmp" "$FLIP" inject "$S/root.npz" --in-place --seed 5 --flips 1 --log "$T/root.jsonl"
  [ "$(cat "$S/.root.npz.tmp.4194302")" = theirs ] || fail "another user's file at a stale temporary's name was removed"
  [ "$(find "$S" -maxdepth 1 -name '.root.npz.tmp.*' | wc -l)" = 1 ] || fail "the run's own earlier file at its temporary's name was left: $(ls -a "$S")"
  expect_rc 0 "$FLIP" revert "$S/root.npz" --log "$T/root.jsonl"
  same "$S/root.npz" "$ATT_SHA" "revert of the in-place edit"
fi

same "$T/in.h5" "$IN_SHA" "the whole run"
echo "ckpt-flip hostile paths: OK"
