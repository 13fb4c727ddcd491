#!/bin/bash
# Runs ckpt-flip_identity.py (Debian's python3 with numpy and torch) against the ckpt-flip binary given
# (not exec'd: the EXIT trap of test_lib.sh removes the scratch directory).
. "$(dirname "$0")/../../support/test_lib.sh" ckpt-flip-identity
$PY "$(dirname "$0")/ckpt-flip_identity.py" "$1" "$T"
