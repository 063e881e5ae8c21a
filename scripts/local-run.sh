#!/usr/bin/env bash
# The whole pipeline on this machine, on CPU, with no cloud: prepare -> train (2 local workers,
# torchrun) -> evaluate. The same jobs/ code the pods run.
#   bash scripts/local-run.sh             generated data in CIFAR-10's format (works offline)
#   bash scripts/local-run.sh --cifar10   the real CIFAR-10 (downloads 170 MB, checks its MD5)
# Results: runs/<data>/model.pt and runs/<data>/metrics.json. A second run reuses both.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") name=synthetic; source_args=(--synthetic 100); epochs=${EPOCHS:-3}; batch=50 ;;
  --cifar10) name=cifar10; source_args=(); epochs=${EPOCHS:-10}; batch=128 ;;
  *) echo "local-run: unknown argument '$1' (allowed: --cifar10, or nothing for generated data)" >&2; exit 2 ;;
esac

bash scripts/setup.sh
.venv/bin/python -m jobs.prepare --dest "data/$name" "${source_args[@]}"
.venv/bin/torchrun --standalone --nnodes=1 --nproc_per_node=2 \
  -m jobs.train --data "data/$name/cifar-10-batches-py" --run-dir "runs/$name" --epochs "$epochs" --batch-size "$batch"
.venv/bin/python -m jobs.evaluate --data "data/$name/cifar-10-batches-py" --model "runs/$name/model.pt" \
  --metrics-out "runs/$name/metrics.json"
