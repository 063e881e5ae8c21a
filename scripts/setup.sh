#!/usr/bin/env bash
# Creates .venv (the virtualenv Pulumi.yaml names) and installs the project with every extra.
#   bash scripts/setup.sh [--gpu] [--quiet]
# torch is the CPU build on Linux x86-64 unless --gpu asks for PyPI's CUDA build (install-torch.sh).
# Idempotent: a second run only checks that the pinned packages are present.
# Progress: a line per step. On a terminal pip shows its own lines and progress bars; elsewhere (a CI
# log, a pipe) scripts/pip_progress.py turns pip's output into a line per download of 10 MB or more and a
# "still downloading: N MB so far" line every 30 s while bytes arrive. --quiet keeps the step lines and
# the 30-second lines only.
set -euo pipefail
cd "$(dirname "$0")/.."

torch_flags=()
quiet=0
for arg in "$@"; do
  case $arg in
    --gpu) torch_flags=(--gpu) ;;
    --quiet) quiet=1 ;;
    *) echo "setup: unknown option $arg; the options are --gpu (PyPI's CUDA build of torch on Linux x86-64) and --quiet (step lines and a line every 30 s only)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is required ($python is $("$python" --version 2>&1))" >&2; exit 1; }

started=$SECONDS
steps=5
step=0
announce() {
  step=$((step + 1))
  echo "setup: [$step/$steps] $*"
}

if [ -x .venv/bin/python ]; then
  announce "using .venv ($(.venv/bin/python --version))"
else
  announce "creating .venv with $python ($("$python" --version 2>&1))"
  "$python" -m venv .venv
fi
terminal=0
[ "$quiet" = 0 ] && [ -t 1 ] && terminal=1
announce "upgrading pip"
# The venv's own pip may not know --progress-bar raw (Python 3.11.7's venv comes with pip 23.2.1, which
# refuses it): this step is one small wheel, quiet off a terminal.
if [ "$terminal" = 1 ]; then
  .venv/bin/python -m pip install --disable-pip-version-check --upgrade pip
else
  .venv/bin/python -m pip install --disable-pip-version-check --quiet --upgrade pip
fi

# pip's options and where its stdout goes: its own bar on a terminal, else pip_progress.py's lines (a pip
# the index holds back to a version without the raw bar: quiet then, as before).
quiet_flag=()
[ "$quiet" = 1 ] && quiet_flag=(--quiet)
pip_flags=(--disable-pip-version-check)
if [ "$terminal" = 1 ]; then
  pip_flags+=(--progress-bar on)
  progress() { cat; }
elif .venv/bin/python -m pip install --help 2>/dev/null | tr -d ' \n' | grep -q "off,raw"; then
  pip_flags+=(--progress-bar raw)
  progress() { "$python" scripts/pip_progress.py ${quiet_flag[@]+"${quiet_flag[@]}"}; }
else
  pip_flags+=(--quiet)
  progress() { cat; }
fi
# torch first and alone, exactly pinned, the build chosen by install-torch.sh; the project's own
# torch==2.13.0 requirement is then already met.
announce "installing torch (scripts/install-torch.sh; PyPI's CUDA build, with --gpu or where PyTorch's CPU index is out of reach, is about 3 GB)"
bash scripts/install-torch.sh .venv/bin/python ${torch_flags[@]+"${torch_flags[@]}"} -- "${pip_flags[@]}" | progress
announce "installing the project and its extras infra, jobs and dev (pulumi's providers, boto3, the test and docs tools)"
.venv/bin/python -m pip install "${pip_flags[@]}" -e ".[infra,jobs,dev]" | progress
# The local state backend Pulumi.yaml names (file://./.pulumi-state): Pulumi's file backend does not
# create its directory, so `pulumi stack init` or `pulumi up` would fail on a fresh clone
# (go-cloud blob/fileblob openBucket stats it and fails unless create_dir is set).
mkdir -p .pulumi-state
# mermaid's JavaScript for the docs site, fetched once into .cache/mermaid/ (scripts/mermaid.py); without
# it only the docs site's build fails, so a network without the npm registry still gets a .venv.
announce "fetching mermaid for the docs site (scripts/mermaid.py)"
.venv/bin/python scripts/mermaid.py || echo "setup: the docs site will not build until \`python scripts/mermaid.py\` succeeds" >&2
echo "setup: .venv ready ($(.venv/bin/python --version)) in $((SECONDS - started)) s"
