#!/bin/bash
# Runs ckpt-flip_dtypes.py (Debian's python3 with numpy) against the ckpt-flip binary given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-dtypes
$PY -c "import numpy" 2> /dev/null || { echo "SKIP: python3-numpy is not installed"; exit 0; }
$PY "$(dirname "$0")/ckpt-flip_dtypes.py" "$1" "$T"
