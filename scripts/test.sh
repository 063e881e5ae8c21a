#!/usr/bin/env bash
# The one test command (README.md, docs/testing.md, .ci/run and .github/workflows/tests.yml all call it):
# installs everything the suite needs on a fresh Debian/Ubuntu machine, then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The cluster tier's tools (Kubernetes, etcd, kwok, Pulumi) are Go builds: minutes of CPU when the cache is
# cold, seconds when warm. Started first, in the background, so a cold build overlaps pip's downloads.
tools_log=$(mktemp)
bash scripts/build-tools.sh >"$tools_log" 2>&1 &
tools_pid=$!
trap 'kill "$tools_pid" 2>/dev/null || true; rm -f "$tools_log"' EXIT

bash scripts/setup.sh
bash scripts/setup-scanners.sh
if ! wait "$tools_pid"; then
  cat "$tools_log" >&2
  echo "test: scripts/build-tools.sh failed (its output above)" >&2
  exit 1
fi
grep '^build-tools:' "$tools_log" || true

# Two worker processes, whole files to each (module fixtures such as the concurrent torchrun jobs
# run once) and the whole cluster tier to one (its control plane starts once): tests/conftest.py
# gives every test its group. The torchrun tests spend much of their time waiting on the rendezvous, which the other
# files fill.
.venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
