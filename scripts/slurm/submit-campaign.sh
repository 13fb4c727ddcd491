#!/usr/bin/env bash
# Submit a campaign as a job array of SHARDS tasks plus the merge/report job chained with afterok.
#   scripts/slurm/submit-campaign.sh CONFIG OUT SHARDS     (prints both job ids)
set -euo pipefail
config=$(realpath "${1:?usage: submit-campaign.sh CONFIG OUT SHARDS}")
out=$(realpath -m "${2:?usage: submit-campaign.sh CONFIG OUT SHARDS}")
shards=${3:-4}
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
array=$(CONFIG=$config OUT=$out sbatch --parsable --export=ALL --array=0-$((shards - 1)) "$here/campaign.sbatch")
report=$(OUT=$out sbatch --parsable --export=ALL --dependency=afterok:${array%%;*} "$here/campaign-report.sbatch")
echo "campaign array job $array, report job $report"
