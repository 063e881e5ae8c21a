#!/usr/bin/env bash
# Installs torch 2.13.0 into a Python environment; scripts/setup.sh calls it for .venv.
#   bash scripts/install-torch.sh PYTHON [--gpu] [-- PIP_ARGS...]
# On Linux x86-64 PyPI's torch is the multi-GB CUDA build, so the default there is the CPU build
# (torch==2.13.0+cpu from PyTorch's CPU index); --gpu takes PyPI's build instead. `torch===2.13.0`
# is PEP 440 arbitrary equality: it matches the version string exactly, so a "+cpu" build (from an
# exported PIP_EXTRA_INDEX_URL, say) cannot stand in for it, while `==2.13.0` ignores local labels.
# Where the CPU index cannot be reached (no route, no DNS), PyPI's build is taken with a warning.
# Elsewhere (macOS, Linux arm64) PyPI's torch==2.13.0 is the one to take, as before.
# Without --gpu, a torch 2.13.0 already installed is kept, whichever build: a later setup.sh (run by
# test.sh, or the README's steps) never swaps a --gpu install back to the CPU build.
set -euo pipefail

TORCH_VERSION=2.13.0  # = pyproject.toml's jobs extra (tests/test_install_torch.py compares them)
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}

python=${1:?usage: install-torch.sh PYTHON [--gpu] [-- PIP_ARGS...]}
shift
gpu=0
while [ $# -gt 0 ]; do
  case $1 in
    --gpu) gpu=1; shift ;;
    --) shift; break ;;
    *) echo "install-torch: unknown option $1; the only option is --gpu (PyPI's CUDA build of torch)" >&2; exit 2 ;;
  esac
done

# Whether the CPU index answers for torch within 20 s: a file:// index (the tests') when its torch
# folder exists, an http(s) one when a GET of its torch page succeeds. pip itself would retry an
# unresolvable host for minutes before failing.
cpu_index_reachable() {
  "$python" - "$TORCH_CPU_INDEX" <<'PY'
import os, sys, urllib.parse, urllib.request
url = sys.argv[1].rstrip("/") + "/torch/"
parts = urllib.parse.urlparse(url)
if parts.scheme == "file":
    sys.exit(0 if os.path.isdir(urllib.request.url2pathname(parts.path)) else 1)
try:
    with urllib.request.urlopen(url, timeout=20) as answer:
        sys.exit(0 if answer.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}

# pip, retried: the CUDA build pulls about 3 GB in wheels of up to 700 MB, and one connection cut
# mid-wheel (seen in CI: nvidia_cublas stopped at 324.5 of 423.1 MB and every in-process resume got
# nothing more) fails the whole setup. A new pip process opens new connections; the wheels it had
# finished stay in pip's cache, so a retry fetches only what is missing. pip 25.1 and newer also
# resume a cut download in-process (--resume-retries); older pips only get the outer retries.
pip_install() {
  local resume=() attempt pause=${INSTALL_TORCH_RETRY_PAUSE_S:-15}
  if "$python" -m pip install --help 2>/dev/null | grep -q -- --resume-retries; then
    resume=(--resume-retries 10)
  fi
  for attempt in 1 2 3; do
    if "$python" -m pip install ${resume[@]+"${resume[@]}"} "$@"; then
      return 0
    fi
    [ "$attempt" = 3 ] && break
    echo "install-torch: pip failed (attempt $attempt of 3); retrying in $((attempt * pause)) s" >&2
    sleep $((attempt * pause))
  done
  echo "install-torch: pip failed 3 times; see its messages above" >&2
  return 1
}

installed=$("$python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "$gpu" = 0 ] && [ "${installed%%+*}" = "$TORCH_VERSION" ]; then
  echo "install-torch: torch $installed is installed"
  exit 0
fi
if [ "$gpu" = 1 ]; then
  pip_install "$@" "torch===$TORCH_VERSION"
elif [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] && ! cpu_index_reachable; then
  # A machine that reaches PyPI but not PyTorch's CPU index (a mirror-only network, say): PyPI's build,
  # which is CUDA-enabled but runs on the CPU, rather than no torch at all.
  echo "install-torch: PyTorch's CPU index ($TORCH_CPU_INDEX) is not reachable; taking PyPI's torch==$TORCH_VERSION (the CUDA build, about 3 GB; it runs on the CPU)" >&2
  pip_install "$@" "torch===$TORCH_VERSION"
elif [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ]; then
  # torch alone from the CPU index, then its dependencies from the usual indexes: pip asks every
  # index for every package, and the CPU index is needed for one.
  pip_install "$@" --no-deps --extra-index-url "$TORCH_CPU_INDEX" "torch==$TORCH_VERSION+cpu"
  pip_install "$@" "torch==$TORCH_VERSION+cpu"
else
  pip_install "$@" "torch==$TORCH_VERSION"
fi
