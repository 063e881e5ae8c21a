#!/usr/bin/env bash
# The one test command (README.md, docs/testing.md, .ci/run and .github/workflows/tests.yml all call it):
# installs everything the suite needs on a fresh Debian/Ubuntu machine, then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/setup-scanners.sh
# Two worker processes, whole files to each (module fixtures such as the concurrent torchrun jobs
# run once) and the whole cluster tier to one (its control plane starts once): tests/conftest.py
# gives every test its group. The torchrun tests spend much of their time waiting on the rendezvous, which the other
# files fill.
.venv/bin/python -m pytest -q -n 2 --dist loadgroup "$@"
