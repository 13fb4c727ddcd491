#!/bin/bash
# Runs ckpt-flip_safetensors_npy.py (Debian's python3 with numpy) against the ckpt-flip binary given.
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-safetensors-npy
$PY "$(dirname "$0")/ckpt-flip_safetensors_npy.py" "$1" "$T"
