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

# Three worker processes on two cores, whole files to each (module fixtures such as the concurrent torchrun
# jobs run once) and the cluster tier to one (its control plane starts once), each whole-run file to any
# (each starts its own): tests/conftest.py gives every test its group. Much of the time is waiting (on a
# rendezvous, a grace period, the Job controller's back-off), which the other workers fill: measured, three
# workers took 26 min 43 s where two would put the cluster tier and the whole-run tier's half hour on one.
.venv/bin/python -m pytest -q -n 3 --dist loadfile "$@"
