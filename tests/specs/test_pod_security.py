"""Pod Security admission, on the pods the cluster really creates.

The training pods come from the Job our controller renders from the ElasticJob (tests/worker_pods.py,
controller/render.py: the template whole, seccompProfile included). Every other pod comes from a
Deployment or Job template that the API server's own controllers copy whole. Each is checked against the Pod Security Standards
(tests/pod_security.py) at the level its namespace enforces, as rendered by the real `synth`.
"""

from __future__ import annotations

import copy

import pytest

from worker_pods import worker_pod
from infra.specs import elastic as elastic_specs
from pod_security import BASELINE, RESTRICTED, violations
from synth_support import STACKS

ENFORCE = "pod-security.kubernetes.io/enforce"


def enforced_level(synth, namespace: str) -> str:
    (labels,) = [
        m["metadata"]["labels"]
        for m in synth.manifests
        if m["kind"] == "Namespace" and m["metadata"]["name"] == namespace
    ]
    return labels[ENFORCE]


def template_pod(obj: dict) -> dict:
    """The pod a Deployment or Job controller creates: its template, whole."""
    template = obj["spec"]["template"]
    return {"metadata": template.get("metadata", {}), "spec": template["spec"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_worker_pod_the_controller_creates_is_admitted(synth_stack, stack):
    synth = synth_stack(stack)
    job = synth.manifest("ElasticJob")
    level = enforced_level(synth, job["metadata"]["namespace"])
    for index in range(job["spec"]["maxReplicas"]):
        pod = worker_pod(job, index)
        assert violations(pod, level) == {}, f"{pod['metadata']['name']} refused under {level}"


def test_worker_pods_keep_their_seccomp_profile_so_the_namespace_enforces_restricted(dev):
    job = dev.manifest("ElasticJob")
    pod = worker_pod(job)
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert violations(pod, RESTRICTED) == {}
    assert enforced_level(dev, job["metadata"]["namespace"]) == RESTRICTED


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_the_api_server_creates_passes_restricted(synth_stack, stack):
    synth = synth_stack(stack)
    owners = [m for m in synth.manifests if m["kind"] in ("Deployment", "StatefulSet", "Job")]
    names = {m["metadata"]["name"] for m in owners}
    assert {elastic_specs.STORE_NAME, elastic_specs.CONTROLLER_NAME} <= names and {n[:5] for n in names} >= {
        "prep-",
        "eval-",
    }, names
    for obj in owners:
        pod = template_pod(obj)
        assert violations(pod, RESTRICTED) == {}, f"{obj['kind']}/{obj['metadata']['name']}"
        # and its namespace's enforced level admits it (restricted for the controller's)
        assert violations(pod, enforced_level(synth, obj["metadata"]["namespace"])) == {}


# --- the checker itself, on known-bad pods ------------------------------------------------------


def compliant_pod() -> dict:
    context = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    return {
        "metadata": {"name": "p"},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "i", "securityContext": context}],
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
    }


def _container_context(pod):
    return pod["spec"]["containers"][0]["securityContext"]


def _drop_seccomp(pod):
    del pod["spec"]["securityContext"]["seccompProfile"]
    del _container_context(pod)["seccompProfile"]


def _drop_run_as_non_root(pod):
    del pod["spec"]["securityContext"]["runAsNonRoot"]
    del _container_context(pod)["runAsNonRoot"]


BAD = {
    # name: (mutation, controls broken under baseline, controls broken under restricted)
    "hostNetwork": (lambda p: p["spec"].update(hostNetwork=True), {"Host Namespaces"}, {"Host Namespaces"}),
    "privileged": (
        lambda p: _container_context(p).update(privileged=True),
        {"Privileged Containers"},
        {"Privileged Containers"},
    ),
    "missing seccomp": (_drop_seccomp, set(), {"Seccomp (v1.19+)"}),
    "unconfined seccomp": (
        lambda p: p["spec"]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        {"Seccomp"},
        {"Seccomp", "Seccomp (v1.19+)"},
    ),
    "runAsNonRoot missing": (_drop_run_as_non_root, set(), {"Running as Non-root"}),
    "capabilities not dropped": (lambda p: _container_context(p).pop("capabilities"), set(), {"Capabilities (v1.22+)"}),
    "SYS_ADMIN added": (
        lambda p: _container_context(p)["capabilities"].update(add=["SYS_ADMIN"]),
        {"Capabilities"},
        {"Capabilities", "Capabilities (v1.22+)"},
    ),
    "hostPath": (
        lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        {"HostPath Volumes"},
        {"HostPath Volumes", "Volume Types"},
    ),
    "hostPort": (
        lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
        {"Host Ports"},
        {"Host Ports"},
    ),
    "privilege escalation allowed": (
        lambda p: _container_context(p).pop("allowPrivilegeEscalation"),
        set(),
        {"Privilege Escalation (v1.8+)"},
    ),
    "root uid": (
        lambda p: p["spec"]["securityContext"].update(runAsUser=0),
        set(),
        {"Running as Non-root user (v1.23+)"},
    ),
    "probe host": (
        lambda p: p["spec"]["containers"][0].update(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}}),
        {"Host Probes / Lifecycle Hooks (v1.34+)"},
        {"Host Probes / Lifecycle Hooks (v1.34+)"},
    ),
}


def test_checker_admits_a_compliant_pod():
    assert violations(compliant_pod(), RESTRICTED) == {}


@pytest.mark.parametrize("name", sorted(BAD))
def test_checker_refuses_a_known_bad_pod(name):
    mutate, baseline, restricted = BAD[name]
    pod = copy.deepcopy(compliant_pod())
    mutate(pod)
    assert set(violations(pod, BASELINE)) == baseline
    assert set(violations(pod, RESTRICTED)) == restricted
