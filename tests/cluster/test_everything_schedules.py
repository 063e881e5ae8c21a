"""Issue 29, test 2: on kwok nodes shaped like each `eks` stack's (scripts/cluster_nodes.py), with the
system pods at their real requests (tests/cluster/system_pods.py, cited), the real scheduler places
every pod the stack runs, in the order a run brings them up:

1. the system pods: the add-ons' DaemonSets and Deployments, then Karpenter's controller;
2. the stack's own long-lived objects as rendered (namespaces, storage, RBAC, the TorchElastic
   controller, the rendezvous store, the GPU device plugin);
3. the data-prep Job;
4. the workers at maxWorkers: the pods the TorchElastic controller would create from the ElasticJob's
   worker template (no controller runs in this tier, so the test creates them; pytorch/elastic
   kubernetes and kubeflow/common pod_control.go GetPodFromTemplate: the template's labels,
   annotations and spec);
5. after the workers are gone, the test (eval) and export Jobs.

kwok runs every bound pod, and ends the Jobs' pods after 1 s (scripts/kwok-stages). The rendezvous
store has no volume (issue 31): no claim waits for a provisioner.

A pod that stays Pending fails the test, named, with the scheduler's reason and the shortfall on each
node it could go to.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_nodes import stack_nodes, tools_version
from kube import CRD, apply, as_list, delete, get, kind_rank, pod_from_template, wait_established, wait_until
from synth_support import REPO, STACKS
from system_pods import addon_deployments, daemonsets, karpenter
from infra import versions
from infra.config.node_fit import cpu_millicores
from infra.config.parsers import memory_mib

SCHEDULE_SECONDS = 15
EKS_STACKS = [s for s in STACKS if "target: existing" not in (REPO / "stacks" / f"Pulumi.{s}.yaml").read_text()]


def pods(plane, namespace: str | None = None, selector: str | None = None) -> list[dict[str, Any]]:
    args = ["get", "pods", "-o", "json"] + (["-n", namespace] if namespace else ["-A"])
    args += ["-l", selector] if selector else []
    return json.loads(plane.kubectl(*args).stdout)["items"]


def scheduled(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName"))


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for t in tolerations:
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if (
            t.get("key") == taint["key"]
            and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
            and t.get("effect", taint["effect"]) == taint["effect"]
        ):
            return True
    return False


def _requests(pod: dict[str, Any]) -> tuple[int, int]:
    def of(container):
        r = (container.get("resources") or {}).get("requests") or {}
        return (cpu_millicores(r["cpu"]) if "cpu" in r else 0, round(memory_mib(r["memory"])) if "memory" in r else 0)

    containers = [of(c) for c in pod["spec"]["containers"]]
    inits = [of(c) for c in pod["spec"].get("initContainers", [])]
    return (
        max(sum(c for c, _ in containers), max((c for c, _ in inits), default=0)),
        max(sum(m for _, m in containers), max((m for _, m in inits), default=0)),
    )


def shortfall(plane, pod: dict[str, Any]) -> str:
    """The pod's requests against what each node its selector and tolerations allow has left."""
    nodes = json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    running = [p for p in pods(plane) if scheduled(p) and p["status"].get("phase") not in ("Succeeded", "Failed")]
    cpu, memory = _requests(pod)
    selector = pod["spec"].get("nodeSelector") or {}
    lines = [f"requests {cpu}m cpu, {memory}Mi memory"]
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in selector.items()) or any(
            t["effect"] in ("NoSchedule", "NoExecute") and not _tolerated(t, pod["spec"].get("tolerations", []))
            for t in node["spec"].get("taints", [])
        ):
            continue
        used = [_requests(p) for p in running if p["spec"]["nodeName"] == node["metadata"]["name"]]
        free_cpu = cpu_millicores(node["status"]["allocatable"]["cpu"]) - sum(c for c, _ in used)
        free_memory = round(memory_mib(node["status"]["allocatable"]["memory"])) - sum(m for _, m in used)
        short = [
            f"{cpu - free_cpu}m cpu" if cpu > free_cpu else "",
            f"{memory - free_memory}Mi memory" if memory > free_memory else "",
        ]
        lines.append(
            f"{node['metadata']['name']}: {free_cpu}m cpu, {free_memory}Mi free"
            + (f", short by {' and '.join(s for s in short if s)}" if any(short) else "")
        )
    return "; ".join(lines)


def expect_scheduled(plane, what: str, selector_pods) -> None:
    """Waits until every pod selector_pods() returns is bound to a node; else fails naming each."""
    deadline = time.monotonic() + SCHEDULE_SECONDS
    while True:
        current = selector_pods()
        pending = [p for p in current if not scheduled(p) and p["status"].get("phase") == "Pending"]
        if current and not pending:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    lines = []
    for pod in pending:
        condition = next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), {})
        lines.append(
            f"{pod['metadata']['namespace']}/{pod['metadata']['name']} stays Pending: "
            f"{condition.get('message', 'not yet considered by the scheduler')} | {shortfall(plane, pod)}"
        )
    assert current, f"{what}: no pod was created"
    raise AssertionError(f"{what}: {len(pending)} pod(s) never scheduled:\n" + "\n".join(lines))


def chart_values() -> dict[str, Any]:
    import subprocess

    result = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/aws/karpenter-provider-aws@v{versions.KARPENTER_VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return yaml.safe_load(Path(json.loads(result.stdout)["Dir"], "charts/karpenter/values.yaml").read_text())


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_every_pod_of_the_stack_schedules(stack, rendered, control_plane):
    plane, synth = control_plane, rendered[stack]
    manifests = synth.manifests
    nodes = stack_nodes(synth.directory, tools_version("KUBERNETES_VERSION"))
    release = synth.one("kubernetes:helm.sh/v3:Release", "capacity-karpenter")["inputs"]["values"]
    system = [*daemonsets(), *addon_deployments(), karpenter(release, chart_values())]
    crds = [m for m in manifests if m["kind"] == CRD]
    steady = sorted(
        (m for m in manifests if m["kind"] not in (CRD, "Job", "ElasticJob", "NodePool", "EC2NodeClass")), key=kind_rank
    )
    jobs = {m["metadata"]["name"].split("-")[0]: m for m in manifests if m["kind"] == "Job"}
    elasticjob = next(m for m in manifests if m["kind"] == "ElasticJob")
    namespace = elasticjob["metadata"]["namespace"]
    workers = [
        pod_from_template(elasticjob, f"{elasticjob['metadata']['name']}-worker-{i}")
        for i in range(elasticjob["spec"]["maxReplicas"])
    ]
    created: list[dict[str, Any]] = []
    with tempfile.NamedTemporaryFile("w", suffix=".json") as nodes_file:
        nodes_file.write(as_list(nodes))
        nodes_file.flush()
        plane.apply_nodes(nodes_file.name)
    try:
        created += system
        apply(plane, system)
        expect_scheduled(plane, "the system pods", lambda: pods(plane, "kube-system"))

        created += crds + steady
        apply(plane, crds)
        wait_established(plane, [c["metadata"]["name"] for c in crds])
        apply(plane, steady)
        # The shared volume's claim names its PersistentVolume: bound by the PV controller before any
        # pod needs it (else the scheduler's first answer is about the claim, not about room).
        static = [c for c in steady if c["kind"] == "PersistentVolumeClaim" and c["spec"].get("volumeName")]
        wait_until(
            "the static claims bound",
            lambda: all((c.get("status") or {}).get("phase") == "Bound" for c in get(plane, static)),
            timeout=60,
        )
        expect_scheduled(
            plane,
            "the stack's long-lived pods",
            lambda: [
                p
                for p in pods(plane)
                if p["metadata"]["namespace"] != "kube-system" or "nvidia" in p["metadata"]["name"]
            ],
        )

        for phase in (["prep"], None, ["eval", "export"]):
            if phase is None:
                created += workers
                apply(plane, workers)
                expect_scheduled(
                    plane,
                    f"the {len(workers)} workers (maxWorkers)",
                    lambda: [
                        p
                        for p in pods(plane, namespace)
                        if p["metadata"]["name"] in {w["metadata"]["name"] for w in workers}
                    ],
                )
                plane.kubectl(
                    "delete", "pods", "-n", namespace, "--wait=true", *[w["metadata"]["name"] for w in workers]
                )
                continue
            batch = [jobs[name] for name in phase if name in jobs]
            created += batch
            apply(plane, batch)
            expect_scheduled(
                plane,
                f"the {', '.join(phase)} Job(s)",
                lambda: [
                    p
                    for p in pods(plane, namespace, "batch.kubernetes.io/job-name")
                    if p["metadata"]["labels"]["batch.kubernetes.io/job-name"] in {j["metadata"]["name"] for j in batch}
                ],
            )
    finally:
        delete(plane, created)
        plane.kubectl("delete", "pv", "--all", "--wait=true", "--timeout=60s", check=False)
        plane.kubectl("delete", "nodes", "--all", "--wait=true", "--timeout=60s")
