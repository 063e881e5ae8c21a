"""The kwok nodes shaped like a stack's nodes, from what `elastic-training synth` rendered for it.

    python scripts/cluster_nodes.py SYNTH_DIR > nodes.json

The nodes' kubelet version is scripts/tools.env's KUBERNETES_VERSION (the control plane's own).

SYNTH_DIR is a directory `elastic-training synth STACK --out SYNTH_DIR` wrote. Nothing of the stack's
logic is restated here: the nodes' labels, taints, zones, instance types and counts are read from the
rendered objects, and what each node gives pods from the project's own tables.

- `eks` stacks (a ManagedNodeGroup in resources.json):
  - the system node group: `scalingConfig.desiredSize` nodes of its instance type with its labels, one
    per zone of the private subnets in turn (an EKS managed node group is an Auto Scaling group, which
    balances its instances across its subnets' zones), plus the label EKS adds to every managed node,
    `eks.amazonaws.com/capacityType: ON_DEMAND` (EKS user guide, awsdocs/amazon-eks-user-guide
    @ 4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7, latest/ug/nodes/managed-node-groups.adoc);
  - the worker pool at its most: `nodeMaxCount` nodes (the NodePool's cpu limit over one node's vCPUs)
    of the pool's first instance type, with the NodePool template's labels and taints, the labels its
    requirements fix, `karpenter.sh/nodepool`, and the zones in turn; GPUs as the `nvidia.com/gpu`
    extended resource the device plugin advertises.
  Each node's allocatable is the kubelet's: infra/aws/node_allocatable.py (nodeadm's reservation, for
  the max-pods nodeadm computes from the ENI table). DaemonSet pods are not subtracted here: tests run
  them as pods.
- `existing` stacks (`local`): one node like kind's (kindest/node, the image .github/workflows/e2e-kind.yml
  runs) on a GitHub-hosted ubuntu-24.04 runner of a public repository: 4 CPUs and 16 GiB (GitHub docs,
  "About GitHub-hosted runners", standard runners), 110 pods (the kubelet's default maxPods), kind's
  control-plane node labels and no taint (kind removes it from a single-node cluster).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from infra.aws import eni_limits, gpu_instances, instance_catalog, node_allocatable  # noqa: E402
from infra.specs import capacity, gpu  # noqa: E402

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
EKS_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
KIND_NODE = {"name": "elastic-training-control-plane", "cpu": 4, "memory_mib": 16 * 1024, "pods": 110}


def _shape(instance_type: str) -> tuple[int, int, int]:
    """(vCPUs, memory MiB, GPUs) of one instance, from the instance catalog or the GPU table."""
    shape = instance_catalog.shape(instance_type)
    nvidia = gpu_instances.nvidia_instance(instance_type)
    if shape is None and nvidia is None:
        raise SystemExit(f"cluster_nodes: {instance_type} is in neither the instance catalog nor the GPU table")
    vcpus = int(shape.vcpus) if shape else nvidia.vcpus
    memory = int(shape.memory_gib * 1024) if shape else nvidia.memory_mib
    return vcpus, memory, nvidia.gpus if nvidia else 0


def node(
    name: str, instance_type: str, labels: dict[str, str], taints: list[dict[str, str]], zone: str, kubelet_version: str
) -> dict[str, Any]:
    vcpus, memory, gpus = _shape(instance_type)
    limits = eni_limits.eni_limits(instance_type)
    if limits is None:
        raise SystemExit(f"cluster_nodes: {instance_type} is not in the ENI table (infra/aws/eni_limits.csv)")
    max_pods = node_allocatable.eni_max_pods(limits.default_max_enis, limits.ipv4_addresses_per_interface)
    allocatable = node_allocatable.allocatable(vcpus, memory, max_pods)
    capacity_ = {"cpu": str(vcpus), "memory": f"{memory}Mi", "pods": str(max_pods)}
    for_pods = {"cpu": f"{allocatable.cpu_millicores}m", "memory": f"{allocatable.memory_mib}Mi", "pods": str(max_pods)}
    if gpus:
        capacity_[gpu.GPU_RESOURCE] = for_pods[gpu.GPU_RESOURCE] = str(gpus)
    labels = {
        **labels,
        capacity.INSTANCE_TYPE_LABEL: instance_type,
        capacity.ZONE_LABEL: zone,
        "topology.kubernetes.io/region": zone[:-1],
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
    }
    return _node_object(name, labels, taints, capacity_, for_pods, kubelet_version)


def _node_object(
    name: str,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    capacity_: dict[str, str],
    allocatable: dict[str, str],
    kubelet_version: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": dict(KWOK_ANNOTATION)},
        "spec": spec,
        "status": {
            "capacity": capacity_,
            "allocatable": allocatable,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "containerRuntimeVersion": "kwok",
                "kernelVersion": "kwok",
                "osImage": "kwok",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        },
    }


def _manifests(synth_dir: Path) -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted((synth_dir / "manifests").glob("*.yaml"))]


def eks_nodes(synth_dir: Path, kubelet_version: str) -> list[dict[str, Any]]:
    resources = json.loads((synth_dir / "resources.json").read_text())
    private_zones = [
        r["inputs"]["availabilityZone"] for r in resources if r["type"] == SUBNET and "private" in r["name"]
    ]
    nodes = []
    for group in (r for r in resources if r["type"] == MANAGED_NODE_GROUP):
        inputs = group["inputs"]
        instance_type = inputs["instanceTypes"][0]
        taints = [
            {"key": t["key"], "value": t.get("value", ""), "effect": _effect(t["effect"])}
            for t in inputs.get("taints") or []
        ]
        labels = {**(inputs.get("labels") or {}), EKS_CAPACITY_TYPE_LABEL: "ON_DEMAND"}
        for i in range(int(inputs["scalingConfig"]["desiredSize"])):
            nodes.append(
                node(
                    f"{group['name']}-{i}",
                    instance_type,
                    labels,
                    taints,
                    private_zones[i % len(private_zones)],
                    kubelet_version,
                )
            )
    pool = next(m for m in _manifests(synth_dir) if m["kind"] == "NodePool")
    template = pool["spec"]["template"]
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    instance_type = requirements[capacity.INSTANCE_TYPE_LABEL][0]
    vcpus, _, _ = _shape(instance_type)
    count = int(pool["spec"]["limits"]["cpu"]) // vcpus
    labels = {
        **template["metadata"]["labels"],
        KARPENTER_NODEPOOL_LABEL: pool["metadata"]["name"],
        capacity.CAPACITY_TYPE_LABEL: requirements[capacity.CAPACITY_TYPE_LABEL][0],
    }
    zones = requirements[capacity.ZONE_LABEL]
    for i in range(count):
        nodes.append(
            node(
                f"{pool['metadata']['name']}-{i}",
                instance_type,
                labels,
                template["spec"].get("taints", []),
                zones[i % len(zones)],
                kubelet_version,
            )
        )
    return nodes


def _effect(eks_effect: str) -> str:
    """EKS's NO_SCHEDULE spelling to Kubernetes' NoSchedule."""
    return {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}.get(
        eks_effect, eks_effect
    )


def kind_node(kubelet_version: str) -> dict[str, Any]:
    name = KIND_NODE["name"]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node-role.kubernetes.io/control-plane": "",
        "node.kubernetes.io/exclude-from-external-load-balancers": "",
    }
    quantities = {
        "cpu": str(KIND_NODE["cpu"]),
        "memory": f"{KIND_NODE['memory_mib']}Mi",
        "pods": str(KIND_NODE["pods"]),
    }
    return _node_object(name, labels, [], quantities, dict(quantities), kubelet_version)


def stack_nodes(synth_dir: Path, kubelet_version: str) -> list[dict[str, Any]]:
    resources = json.loads((synth_dir / "resources.json").read_text())
    if any(r["type"] == MANAGED_NODE_GROUP for r in resources):
        return eks_nodes(synth_dir, kubelet_version)
    return [kind_node(kubelet_version)]


def tools_version(key: str) -> str:
    """A version pinned in scripts/tools.env."""
    for line in (REPO / "scripts" / "tools.env").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip()
    raise KeyError(key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("synth_dir", type=Path)
    args = parser.parse_args()
    if not (args.synth_dir / "resources.json").is_file():
        print(
            f"cluster_nodes: {args.synth_dir} holds no resources.json: run `elastic-training synth STACK --out DIR` "
            f"first",
            file=sys.stderr,
        )
        return 2
    print(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": stack_nodes(args.synth_dir, tools_version("KUBERNETES_VERSION")),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
