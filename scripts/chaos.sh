#!/usr/bin/env bash
# Random fault schedules, each into one real run of the `local` stack on a control plane whose pods run
# for real (tests/cluster/whole_run/test_chaos.py; docs/testing.md, "Pods that run"). More seeds than the
# suite's three:
#   bash scripts/chaos.sh --seeds N [--from FIRST]     # seeds FIRST .. FIRST+N-1 (FIRST: 0)
#   CHAOS_SEEDS=5,6 bash scripts/chaos.sh              # replay the seeds a failure printed
# Each seed takes about two minutes on two cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: chaos.sh [--seeds N] [--from FIRST]"
seeds="" first=0
while [ $# -gt 0 ]; do
  case $1 in
    --seeds) seeds=${2:-}; shift 2 ;;
    --from) first=${2:-}; shift 2 ;;
    *) echo "chaos: unknown option $1; $usage" >&2; exit 2 ;;
  esac
done
for value in "$seeds" "$first"; do
  case $value in *[!0-9]*) echo "chaos: '$value' is not a whole number; $usage" >&2; exit 2 ;; esac
done
if [ -n "$seeds" ]; then
  CHAOS_SEEDS=$(seq -s, "$first" $((first + seeds - 1)))
  export CHAOS_SEEDS
fi
cd "$root"
exec .venv/bin/python -m pytest tests/cluster/whole_run/test_chaos.py -p no:randomly -s -q
