#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler) with kwok's fake kubelets, from the binaries scripts/build-tools.sh builds.
#   bash scripts/control-plane.sh up [--stack NAME] [--run-pods] [--name INSTANCE | --dir DIR]
#   eval "$(bash scripts/control-plane.sh env [--name INSTANCE | --dir DIR])"
#   bash scripts/control-plane.sh down [--name INSTANCE | --dir DIR]
#   bash scripts/control-plane.sh lose-node NODE [--name INSTANCE | --dir DIR]
# up waits until the API server is ready and, with --stack, creates kwok nodes shaped like that stack's
# (scripts/cluster_nodes.py, from what `elastic-training synth NAME` renders into .synth/NAME).
# An instance's state (certificates, etcd data, logs, kubeconfig) is in --dir, by default
# ${XDG_CACHE_HOME:-$HOME/.cache}/elastic-training/control-plane/<INSTANCE> (INSTANCE: default).
# --run-pods: every pod runs for real, as a process of this checkout's .venv (scripts/pod_runner.py: the
# "image" is this checkout); kwok plays the nodes only; `env` also prints SHARED_VOLUMES, the folder
# whose <namespace>/<claim> backs each PersistentVolumeClaim. lose-node: a node lost without notice
# (its pods' processes SIGKILLed, its heartbeats stopped). See docs/testing.md, "Pods that run".
# Processes: scripts/control_plane.py; kwok Stages: scripts/kwok-stages/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: control-plane.sh up [--stack NAME] [--run-pods] | env | down | lose-node NODE, each with [--name INSTANCE | --dir DIR]"

command=${1:-}
[ $# -gt 0 ] && shift
stack="" name=default dir="" run_pods=() node=""
if [ "$command" = lose-node ]; then
  case ${1:-} in ""|-*) echo "control-plane: lose-node needs a node name; $usage" >&2; exit 2 ;; esac
  node=$1; shift
fi
while [ $# -gt 0 ]; do
  case $1 in
    --run-pods) run_pods=(--run-pods); shift ;;
    --stack) stack=${2:?--stack needs a stack name}; shift 2 ;;
    --name) name=${2:?--name needs an instance name}; shift 2 ;;
    --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
    *) echo "control-plane: unknown option $1; $usage" >&2; exit 2 ;;
  esac
done
case $name in *[!A-Za-z0-9._-]*|"") echo "control-plane: --name '$name' may use only letters, digits, '.', '_' and '-'" >&2; exit 2 ;; esac
[ -n "$dir" ] || dir=${XDG_CACHE_HOME:-$HOME/.cache}/elastic-training/control-plane/$name

python=$root/.venv/bin/python
[ -x "$python" ] || python=python3
plane=("$python" "$root/scripts/control_plane.py")

case $command in
  up)
    if [ -n "$stack" ] && [ ! -f "$root/stacks/Pulumi.$stack.yaml" ]; then
      echo "control-plane: no stack '$stack'; the stacks are: $(cd "$root/stacks" && ls Pulumi.*.yaml | sed 's/Pulumi\.\(.*\)\.yaml/\1/' | tr '\n' ' ' | sed 's/ $//')" >&2
      exit 2
    fi
    bin=$(bash "$root/scripts/build-tools.sh" kubernetes etcd kwok | tail -n 1)
    nodes=()
    if [ -n "$stack" ]; then
      (cd "$root" && "$python" -m infra.cli synth "$stack" --out ".synth/$stack" >/dev/null)
      mkdir -p "$dir"
      "$python" "$root/scripts/cluster_nodes.py" "$root/.synth/$stack" >"$dir/nodes.json"
      nodes=(--nodes "$dir/nodes.json")
    fi
    "${plane[@]}" up --dir "$dir" --bin "$bin" "${nodes[@]}" "${run_pods[@]}"
    ;;
  lose-node) "${plane[@]}" lose-node "$node" --dir "$dir" ;;
  env) "${plane[@]}" env --dir "$dir" ;;
  down) "${plane[@]}" down --dir "$dir" ;;
  *) echo "control-plane: unknown command '${command}'; $usage" >&2; exit 2 ;;
esac
