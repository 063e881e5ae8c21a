#!/usr/bin/env bash
# Creates .venv (the virtualenv Pulumi.yaml names) and installs the project with every extra.
#   bash scripts/setup.sh [--gpu]
# torch is the CPU build on Linux x86-64 unless --gpu asks for PyPI's CUDA build (install-torch.sh).
# Idempotent: a second run only checks that the pinned packages are present.
set -euo pipefail
cd "$(dirname "$0")/.."

torch_flags=()
for arg in "$@"; do
  case $arg in
    --gpu) torch_flags=(--gpu) ;;
    *) echo "setup: unknown option $arg; the only option is --gpu (PyPI's CUDA build of torch on Linux x86-64)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is required ($python is $("$python" --version 2>&1))" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
# torch first and alone, exactly pinned, the build chosen by install-torch.sh; the project's own
# torch==2.13.0 requirement is then already met.
bash scripts/install-torch.sh .venv/bin/python ${torch_flags[@]+"${torch_flags[@]}"} -- --quiet --disable-pip-version-check
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[infra,jobs,dev]"
# The local state backend Pulumi.yaml names (file://./.pulumi-state): Pulumi's file backend does not
# create its directory, so `pulumi stack init` or `pulumi up` would fail on a fresh clone
# (go-cloud blob/fileblob openBucket stats it and fails unless create_dir is set).
mkdir -p .pulumi-state
# mermaid's JavaScript for the docs site, fetched once into .cache/mermaid/ (scripts/mermaid.py); without
# it only the docs site's build fails, so a network without the npm registry still gets a .venv.
.venv/bin/python scripts/mermaid.py || echo "setup: the docs site will not build until \`python scripts/mermaid.py\` succeeds" >&2
echo "setup: .venv ready ($(.venv/bin/python --version))"
