#!/usr/bin/env bash
# checkov lives in its own virtualenv: installed beside the project it would downgrade boto3 and others.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv-checkov/bin/python ] || "$python" -m venv .venv-checkov
.venv-checkov/bin/python -m pip install --quiet --disable-pip-version-check "checkov==3.3.30"
