#!/usr/bin/env bash
# The one test command (README, .ci/run and .github/workflows/tests.yml all call it):
# installs everything the suite needs on a fresh Debian/Ubuntu machine, then runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh
bash scripts/setup.sh
bash scripts/setup-scanners.sh
.venv/bin/python -m pytest -q "$@"
