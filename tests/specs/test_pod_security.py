"""Pod Security admission, on the pods the cluster really creates.

The training pods are created by the TorchElastic controller, not the API server: they are what
tests/controller_model.py builds from our rendered ElasticJob (the controller's 1.15-era types drop
seccompProfile, among others). Every other pod comes from a Deployment or Job template that the API
server's own controllers copy whole. Each is checked against the Pod Security Standards
(tests/pod_security.py) at the level its namespace enforces, as rendered by the real `synth`.
"""

from __future__ import annotations

import copy
import json

import pytest

from controller_model import command_line, injected_args, worker_pod
from infra.specs import elastic as elastic_specs
from infra.specs.workloads import WORKER_CONTAINER
from pod_security import BASELINE, RESTRICTED, violations
from synth_support import STACKS

ENFORCE = "pod-security.kubernetes.io/enforce"


def enforced_level(synth, namespace: str) -> str:
    (labels,) = [m["metadata"]["labels"] for m in synth.manifests
                 if m["kind"] == "Namespace" and m["metadata"]["name"] == namespace]
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


def test_worker_pods_lose_their_seccomp_profile_so_restricted_would_refuse_them(dev):
    job = dev.manifest("ElasticJob")
    # The template carries no profile either, since the controller's 1.15 types cannot keep one and a
    # refresh would otherwise see it vanish (infra/specs/controller_fields.py): Seccomp is the only
    # thing between it and restricted, as for the pods.
    assert set(violations(template_pod({"spec": job["spec"]["replicaSpecs"]["Worker"]}), RESTRICTED)) == {"Seccomp (v1.19+)"}
    pod = worker_pod(job)
    assert "seccompProfile" not in json.dumps(pod)
    assert set(violations(pod, RESTRICTED)) == {"Seccomp (v1.19+)"}
    assert violations(pod, BASELINE) == {}
    # so the training namespace must not enforce restricted (it still warns and audits on it)
    namespace = job["metadata"]["namespace"]
    assert enforced_level(dev, namespace) == BASELINE


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_the_api_server_creates_passes_restricted(synth_stack, stack):
    synth = synth_stack(stack)
    owners = [m for m in synth.manifests if m["kind"] in ("Deployment", "Job")]
    names = {m["metadata"]["name"] for m in owners}
    assert {elastic_specs.STORE_NAME, elastic_specs.CONTROLLER_NAME} <= names and {n[:5] for n in names} >= {"prep-", "eval-"}, names
    for obj in owners:
        pod = template_pod(obj)
        assert violations(pod, RESTRICTED) == {}, f"{obj['kind']}/{obj['metadata']['name']}"
        # and its namespace's enforced level admits it (restricted for the controller's)
        assert violations(pod, enforced_level(synth, obj["metadata"]["namespace"])) == {}


# --- the controller model itself, against what its source says -------------------------------

def test_controller_model_builds_the_pod_as_upstream_does(dev):
    job = dev.manifest("ElasticJob")
    template = job["spec"]["replicaSpecs"]["Worker"]["template"]
    pod = worker_pod(job, 1)
    assert pod["metadata"]["name"] == "train-run-1-worker-1"
    assert pod["metadata"]["namespace"] == job["metadata"]["namespace"]
    assert pod["metadata"]["labels"] == {**template["metadata"]["labels"], "group-name": "elastic.pytorch.org",
                                         "job-name": "train-run-1", "replica-type": "worker", "replica-index": "1"}
    assert pod["spec"]["restartPolicy"] == "Never"  # from the replica spec's ExitCode
    ours = template["spec"]["containers"][0]
    line = command_line(pod, WORKER_CONTAINER)
    assert line == [*ours["command"], "--rdzv_backend=etcd", "--rdzv_endpoint=rendezvous-store:29400",
                    "--rdzv_id=train-run-1", "--nnodes=1:2", *ours["args"]]
    # 1.15 fields stay, newer ones go
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "seccompProfile" not in pod["spec"]["securityContext"]


def test_controller_model_nnodes_falls_back_to_replicas():
    job = {"metadata": {"name": "j", "namespace": "n"},
           "spec": {"rdzvEndpoint": "e:1", "replicaSpecs": {"Worker": {"replicas": 3, "restartPolicy": "OnFailure",
                                                                        "template": {"spec": {"containers": [
                                                                            {"name": "w", "args": ["x"]}]}}}}}}
    assert injected_args(job)[-1] == "--nnodes=3:3"
    pod = worker_pod(job, 0)
    assert pod["spec"]["restartPolicy"] == "OnFailure" and pod["spec"]["containers"][0]["args"][-1] == "x"


# --- the checker itself, on known-bad pods ------------------------------------------------------

def compliant_pod() -> dict:
    context = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
               "seccompProfile": {"type": "RuntimeDefault"}}
    return {"metadata": {"name": "p"},
            "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c", "image": "i", "securityContext": context}],
                     "volumes": [{"name": "v", "emptyDir": {}}]}}


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
    "privileged": (lambda p: _container_context(p).update(privileged=True),
                   {"Privileged Containers"}, {"Privileged Containers"}),
    "missing seccomp": (_drop_seccomp, set(), {"Seccomp (v1.19+)"}),
    "unconfined seccomp": (lambda p: p["spec"]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
                           {"Seccomp"}, {"Seccomp", "Seccomp (v1.19+)"}),
    "runAsNonRoot missing": (_drop_run_as_non_root, set(), {"Running as Non-root"}),
    "capabilities not dropped": (lambda p: _container_context(p).pop("capabilities"), set(), {"Capabilities (v1.22+)"}),
    "SYS_ADMIN added": (lambda p: _container_context(p)["capabilities"].update(add=["SYS_ADMIN"]),
                        {"Capabilities"}, {"Capabilities", "Capabilities (v1.22+)"}),
    "hostPath": (lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
                 {"HostPath Volumes"}, {"HostPath Volumes", "Volume Types"}),
    "hostPort": (lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
                 {"Host Ports"}, {"Host Ports"}),
    "privilege escalation allowed": (lambda p: _container_context(p).pop("allowPrivilegeEscalation"),
                                     set(), {"Privilege Escalation (v1.8+)"}),
    "root uid": (lambda p: p["spec"]["securityContext"].update(runAsUser=0), set(), {"Running as Non-root user (v1.23+)"}),
    "probe host": (lambda p: p["spec"]["containers"][0].update(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}}),
                   {"Host Probes / Lifecycle Hooks (v1.34+)"}, {"Host Probes / Lifecycle Hooks (v1.34+)"}),
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
