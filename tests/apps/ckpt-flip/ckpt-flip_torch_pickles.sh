#!/bin/bash
# Runs ckpt-flip_torch_pickles.py (Debian's python3 with torch) against the ckpt-flip binary given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-torch-pickles
$PY -c "import torch" 2> /dev/null || { echo "SKIP: python3-torch is not installed"; exit 0; }
$PY "$(dirname "$0")/ckpt-flip_torch_pickles.py" "$1" "$T"
