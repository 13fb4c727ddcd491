#!/bin/bash
# Runs ckpt-flip_torch_byteorder.py (Debian's python3 with torch and numpy) against the ckpt-flip binary given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-torch-byteorder
$PY -c "import torch, numpy" 2> /dev/null || { echo "SKIP: python3-torch is not installed"; exit 0; }
cd "$(dirname "$0")" && $PY ckpt-flip_torch_byteorder.py "$1" "$T"
