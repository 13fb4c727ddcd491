#!/usr/bin/env bash
# bash -n on every batch script (Slurm, PBS, the scripts they share): the PBS ones have no server to run on here.
set -euo pipefail
src=${1:?usage: check_syntax.sh SOURCE_DIR}
n=0
for f in "$src"/scripts/slurm/* "$src"/scripts/pbs/* "$src"/scripts/hpc/*; do
  bash -n "$f"
  n=$((n + 1))
done
echo "syntax OK: $n scripts"
