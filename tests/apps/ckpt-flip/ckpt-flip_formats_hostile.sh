#!/bin/bash
# Hostile files in every format PyTorch users have (ckpt-flip_formats_hostile.py: a truncated zip, a
# bad central directory, bytes appended after the archive, pickle opcodes outside the subset, a pickle
# calling os.system, a tensor used as a dict key, a byteorder record neither little nor big, the legacy
# non-zip torch format, torch.save dicts giving two tensors one name, a zip64 end record inside a
# tensor's bytes, safetensors headers lying about offsets, overlapping tensors or not UTF-8, .npz
# members that are not .npy, a zero-length file, a directory and a FIFO where a file is expected),
# through every subcommand: the documented exit code (docs/reference/exit-codes.md: 4 for content, 3 for
# what is not a regular file), exactly one line `ckpt-flip: error: ...` naming the file, the input
# byte-identical, no output, log or temporary left, and the pickle's command never run.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-formats-hostile
FLIP=$1
EXPECT_TIMEOUT=60  # a FIFO opened for reading would block: fail, not hang
marker="$T/EXECUTED"
state() { (cd "$1" && ls -A && find . -type f -exec sha256sum {} + | sort); }

$PY "$(dirname "$0")/ckpt-flip_formats_hostile.py" "$T/cases" "$marker" || fail "could not write the hostile files"
# A valid HDF5 checkpoint and a flip log of it: revert and replay get a log that is fine, diff a
# file that is fine, so the error can only be the hostile file's.
$PY -c "
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'w') as f:
    f['model/w'] = np.arange(12, dtype='f4')" "$T/good.h5"
run "$FLIP" inject "$T/good.h5" -o "$T/good-out.h5" --log "$T/good.jsonl" --flips 2 --seed 1

n=0
while IFS=$'\t' read -r name file code pattern; do
  d="$T/cases/$name"
  F="$d/$file"
  before=$(state "$d")
  while IFS= read -r cmd; do
    # shellcheck disable=SC2086
    eval "set -- $cmd"
    expect_rc "$code" "$FLIP" "$@"
    line=$(cat "$T/stderr")
    case "$line" in
      "ckpt-flip: error: "*) ;;
      *) fail "$name: ckpt-flip $*: the error line does not start with 'ckpt-flip: error: ': $line" ;;
    esac
    grep -qF -- "$F" "$T/stderr" || fail "$name: ckpt-flip $*: the error does not name the file: $line"
    grep -qE -- "$pattern" "$T/stderr" || fail "$name: ckpt-flip $*: the error does not say '$pattern': $line"
    [ "$(state "$d")" = "$before" ] || fail "$name: ckpt-flip $*: the file changed or something was left next to it: $(ls -A "$d")"
    [ ! -e "$marker" ] || fail "$name: ckpt-flip $*: the pickle's os.system ran"
    n=$((n + 1))
  done <<CMDS
inspect "$F"
inspect "$F" --json
inject "$F" --in-place --log "$d/in-place.jsonl" --flips 1 --seed 1
inject "$F" -o "$d/out.bin" --log "$d/out.jsonl" --flips 1 --seed 1
inject "$F" --dry-run --flips 1 --seed 1
revert "$F" --log "$T/good.jsonl"
replay "$F" --log "$T/good.jsonl"
replay "$F" --log "$T/good.jsonl" -o "$d/replayed.bin"
diff "$F" "$T/good.h5"
diff "$T/good.h5" "$F"
scan "$F"
CMDS
done < "$T/cases/cases.tsv"
[ "$n" = $((22 * 11)) ] || fail "ran $n checks, expected $((22 * 11))"
echo "PASS ($n checks)"
