#!/usr/bin/env bash
# Debian packages the test suite runs for real: etcd (v2 API) for torchrun's etcd rendezvous.
# Installed in its own apt-get command: never together with kubernetes-client, which clashes with kubectl.
set -euo pipefail
if command -v etcd >/dev/null 2>&1; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
command -v etcd >/dev/null || { echo "install-system-deps: etcd is still missing after apt-get" >&2; exit 1; }
