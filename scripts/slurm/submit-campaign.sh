#!/usr/bin/env bash
# Submit a campaign as a job array of SHARDS tasks plus the merge/report job chained with afterok.
#   scripts/slurm/submit-campaign.sh CONFIG OUT [SHARDS]     (SHARDS 1..100000, default 4; prints both job ids)
# Exit 2: bad arguments (one line naming them; CONFIG or OUT beginning with '-' too); 3: CONFIG is
# not a readable file. Nothing is
# submitted or made unless the arguments are good.
set -euo pipefail
usage="usage: submit-campaign.sh CONFIG OUT [SHARDS]"
case "${1:-}" in -h|--help) echo "$usage"; echo "  submits ckpt-flip campaign CONFIG --out OUT as a Slurm job array of SHARDS tasks (--shard i/SHARDS), then ckpt-flip report OUT after it (afterok)"; exit 0 ;; esac
[[ $# -ge 2 && $# -le 3 ]] || { echo "submit-campaign.sh: $usage" >&2; exit 2; }
# A path that begins with '-' reads as an option to realpath (and to the user): a bad argument.
for a in "CONFIG:$1" "OUT:$2"; do
  [[ ${a#*:} != -* ]] || { echo "submit-campaign.sh: ${a%%:*} '${a#*:}' begins with '-' (for a file so named, write ./${a#*:})" >&2; exit 2; }
done
[[ -f $1 && -r $1 ]] || { echo "submit-campaign.sh: CONFIG $1: not a readable file" >&2; exit 3; }
[[ -n $2 ]] || { echo "submit-campaign.sh: OUT is empty" >&2; exit 2; }
shards=${3:-4}
# A count, as decimal digits: "0", "-2", "abc" or "1e3" gave sbatch an --array of 0--1 (or worse).
[[ $shards =~ ^[1-9][0-9]*$ && ${#shards} -le 6 && $shards -le 100000 ]] ||
  { echo "submit-campaign.sh: SHARDS '$shards' is not a count of array tasks in 1..100000" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "submit-campaign.sh: sbatch not found: this submits to Slurm (run scripts/slurm/campaign.sbatch's command by hand elsewhere)" >&2; exit 2; }
config=$(realpath "$1")
out=$(realpath -m "$2")
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
array=$(CONFIG=$config OUT=$out sbatch --parsable --export=ALL --array=0-$((shards - 1)) "$here/campaign.sbatch")
report=$(OUT=$out sbatch --parsable --export=ALL --dependency=afterok:"${array%%;*}" "$here/campaign-report.sbatch")
echo "campaign array job $array, report job $report"
