#!/bin/bash
# Runs ckpt-flip_dcp.py (Debian's python3 with numpy and torch) against the ckpt-flip binary given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-dcp
$PY "$(dirname "$0")/ckpt-flip_dcp.py" "$1" "$T"
