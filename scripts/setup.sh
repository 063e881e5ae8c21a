#!/usr/bin/env bash
# Creates .venv (the virtualenv Pulumi.yaml names) and installs the project with every extra.
# Idempotent: a second run only checks that the pinned packages are present.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is required ($python is $("$python" --version 2>&1))" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
# torch first and alone, exactly pinned: a bare "torch" would pull a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[infra,jobs,dev]"
# The local state backend Pulumi.yaml names (file://./.pulumi-state): Pulumi's file backend does not
# create its directory, so `pulumi stack init` or `pulumi up` would fail on a fresh clone
# (go-cloud blob/fileblob openBucket stats it and fails unless create_dir is set).
mkdir -p .pulumi-state
echo "setup: .venv ready ($(.venv/bin/python --version))"
