"""The rendezvous store (issue 31): the training image's jobs.elastic.store_server in one pod with no volume, so
any system node in any zone can run it; its own priority, a disruption budget, a StatefulSet of one
(never two stores at once: tests/cluster/test_store_never_twice.py shows it), fast probes. Strict validity of the objects: test_manifests_valid.py;
the reviewed whole: tests/golden/platform-objects.yaml."""

from __future__ import annotations

from infra.config import load_settings
from infra.config.stack_file import read_stack_file
from infra.specs import elastic, rendezvous_store, workloads
from jobs.elastic import rendezvous
from jobs.elastic import store_server

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "0" * 64


def _store(namespace: str = "ml") -> dict[str, dict]:
    return {obj["kind"]: obj for obj in elastic.store_objects(namespace, IMAGE, "IfNotPresent")}


def test_the_store_is_the_training_image_s_store_server_with_no_volume_on_any_node():
    objects = _store()
    pod = objects["StatefulSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE and container["command"] == ["python", "-m", "jobs.elastic.store_server"]
    assert container["args"] == ["--host=0.0.0.0", f"--port={elastic.STORE_PORT}"]
    store_server.build_parser().parse_args(container["args"])  # the module's own parser takes them
    # nothing that ties it to a node or a zone: no claim, no node selector, no affinity
    assert [v for v in pod["volumes"] if "emptyDir" not in v] == []
    assert "nodeSelector" not in pod and "affinity" not in pod
    assert objects["Service"]["spec"]["ports"][0]["port"] == elastic.STORE_PORT == rendezvous.DEFAULT_PORT
    assert elastic.rendezvous_endpoint() == f"{elastic.STORE_NAME}:{elastic.STORE_PORT}"
    # two stores at once would let the agents form two groups: one pod of a StatefulSet, which starts its
    # ordinal again only once the old pod is gone (a Deployment does not wait: upstream-facts-4 fact 10)
    assert "Deployment" not in objects and objects["StatefulSet"]["spec"]["replicas"] == 1
    assert objects["StatefulSet"]["spec"]["serviceName"] == objects["Service"]["metadata"]["name"]
    assert objects["StatefulSet"]["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    # a broken store pod does not block the fixed template (review rdzv-1 item 1: OrderedReady does)
    assert objects["StatefulSet"]["spec"]["podManagementPolicy"] == "Parallel"
    assert pod["securityContext"]["runAsUser"] == elastic.STORE_UID == 10001  # the image's user (images/Dockerfile)
    # kept on a node that stops answering, without end (review rdzv-1 item 3): an eviction there moves nothing
    # (the StatefulSet waits for the pod to be gone) and kills the store of a node that comes back
    assert sorted((t["key"], t["effect"], t.get("tolerationSeconds")) for t in pod["tolerations"]) == [
        ("node.kubernetes.io/not-ready", "NoExecute", None),
        ("node.kubernetes.io/unreachable", "NoExecute", None),
    ]


def test_the_workers_name_our_backend_after_the_controller_s_etcd():
    args = workloads.training_args(load_settings(read_stack_file("dev"), "dev"), "--rdzv_id=x")
    assert args[0] == f"--rdzv_backend={elastic.RENDEZVOUS_BACKEND}"
    assert elastic.RENDEZVOUS_BACKEND == rendezvous.BACKEND


def test_the_store_runs_above_the_workloads_with_a_class_of_its_own():
    pod = _store()["StatefulSet"]["spec"]["template"]["spec"]
    klass = rendezvous_store.priority_class()
    assert pod["priorityClassName"] == klass["metadata"]["name"] == "elastic-training-rendezvous"
    # not system-cluster-critical (kube-system only); user classes stop at one billion
    assert 0 < klass["value"] <= 1_000_000_000 and klass.get("globalDefault", False) is False
    assert klass["preemptionPolicy"] == "PreemptLowerPriority"


def test_the_budget_holds_the_store_and_nothing_else():
    objects = _store()
    budget = objects["PodDisruptionBudget"]
    template_labels = objects["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    selector = budget["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template_labels.items()
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"  # a broken store may still go
    for other in elastic.controller_objects("ml", "image@sha256:" + "0" * 64, "efs-pvc"):
        if other["kind"] == "Deployment":
            assert not selector.items() <= other["spec"]["template"]["metadata"]["labels"].items()
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"ml"}


def test_probes_make_a_new_store_ready_within_seconds():
    (container,) = _store()["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    assert container["startupProbe"]["periodSeconds"] == 1
    assert container["readinessProbe"]["periodSeconds"] <= 2
    assert container["readinessProbe"]["tcpSocket"] == {"port": elastic.STORE_PORT}
    # liveness only after startup: a slow first start is not killed
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] >= 60


def test_eks_has_no_volume_for_the_store_and_no_ebs_driver(dev):
    assert not [
        m
        for m in dev.manifests
        if m["kind"] in ("PersistentVolumeClaim", "StorageClass")
        and m["metadata"]["name"].startswith(("etcd", "rendezvous"))
    ]
    assert not [a for a in dev.of_type("aws:eks/addon:Addon") if "ebs" in a["inputs"]["addonName"]]
    assert not [r for r in dev.of_type("aws:iam/role:Role") if "ebs" in r["name"]]
    store = dev.one("kubernetes:apps/v1:StatefulSet", "elastic-store-statefulset")
    assert dev.one("kubernetes:scheduling.k8s.io/v1:PriorityClass")["urn"] in store["dependsOn"]
    # the store runs the image the stack pushed, by digest
    (container,) = dev.manifest("StatefulSet", elastic.STORE_NAME)["spec"]["template"]["spec"]["containers"]
    assert "@sha256:" in container["image"]
    # the budget would fail a node-group update after 15 minutes; forced, the update moves the store last
    assert dev.one("eks:index:ManagedNodeGroup")["inputs"]["forceUpdateVersion"] is True


def test_an_existing_cluster_runs_the_store_from_the_image_uri_with_no_claim(synth_stack):
    local = synth_stack("local")
    assert [
        m["metadata"]["name"]
        for m in local.manifests
        if m["kind"] == "PersistentVolumeClaim" and m["metadata"]["name"].startswith(("etcd", "rendezvous"))
    ] == []
    (container,) = local.manifest("StatefulSet", elastic.STORE_NAME)["spec"]["template"]["spec"]["containers"]
    assert container["image"] == load_settings(read_stack_file("local"), "local").image_uri
    assert local.manifest("PriorityClass")["metadata"]["name"] == rendezvous_store.PRIORITY_CLASS
