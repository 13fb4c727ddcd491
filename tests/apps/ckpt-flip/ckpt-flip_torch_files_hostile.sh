#!/bin/bash
# Runs ckpt-flip_torch_files_hostile.py (Debian's python3; no torch needed) against the ckpt-flip given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-torch-files-hostile
$PY "$(dirname "$0")/ckpt-flip_torch_files_hostile.py" "$1" "$SRC/tests/inject/formats/torch_files/torch-2.11.0-h200" "$T"
