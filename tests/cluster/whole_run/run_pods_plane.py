"""Control planes whose pods run for real (`up --run-pods`, scripts/pod_runner.py), one per test module,
with the nodes the module asks for (kind's shape: scripts/cluster_nodes.py)."""

from __future__ import annotations

import json

from cluster_nodes import kind_node, tools_version
from control_plane import ControlPlane, alive


def kind_nodes(count: int) -> list[dict]:
    """kind's nodes (scripts/cluster_nodes.py): the control-plane node the `local` stack runs on, and
    count - 1 workers of the same shape named as a multi-node kind cluster names them."""
    version = tools_version("KUBERNETES_VERSION")
    nodes = [kind_node(version)]
    for i in range(1, count):
        node = kind_node(version)
        name = "elastic-training-worker" + (str(i) if i > 1 else "")
        node["metadata"]["name"] = name
        node["metadata"]["labels"] = {
            k: v
            for k, v in node["metadata"]["labels"].items()
            if not k.startswith("node-role") and "exclude-from" not in k
        }
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        nodes.append(node)
    return nodes


def add_node(plane: ControlPlane, name: str) -> None:
    """A new node of kind's worker shape (as a new instance joins), its kwok started, Ready."""
    node = kind_nodes(2)[1]
    node["metadata"]["name"] = name
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    path = plane.dir / f"node-{name}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    plane.apply_nodes(str(path))


def start_plane(directory, tools_bin, node_count: int) -> ControlPlane:
    plane = ControlPlane(directory, tools_bin)
    nodes = directory / "nodes.json"
    directory.mkdir(parents=True, exist_ok=True)
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": kind_nodes(node_count)}))
    plane.up(str(nodes), run_pods=True)
    return plane


def stop_plane(plane: ControlPlane) -> None:
    pids = dict(plane.state.pids)
    plane.down()
    left = [name for name, pid in pids.items() if alive(pid)]
    assert not left, f"still running after down: {left}"


def pod_network(ip: str) -> bool:
    """Whether `ip` is a pod address a pod runner hands out: 127.<odd>.<0-249>.<1-250>, the pods' /16 of
    the pair it claimed (scripts/pod_runner.py claim_networks), never the loopback's own 127.0.0.1."""
    octets = [int(part) for part in ip.split(".")]
    return len(octets) == 4 and octets[0] == 127 and octets[1] % 2 == 1 and octets[2] < 250 and 1 <= octets[3] <= 250
