#!/bin/bash
# Runs ckpt-flip_torch_files.py (Debian's python3; no torch needed) against the ckpt-flip binary given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-torch-files
$PY "$(dirname "$0")/ckpt-flip_torch_files.py" "$1" "$T"
