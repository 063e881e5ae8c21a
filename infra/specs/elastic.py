"""The TorchElastic controller (CRD, RBAC, Deployment) and the etcd it and torchrun rendezvous on."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from infra import versions
from infra.specs import rendezvous_store
from infra.specs.labels import PART_OF, common_labels
from infra.specs.security import (BASELINE, RESTRICTED, container_security_context, pod_security_context, pod_security_labels,
                                  resources)
from infra.specs.suppressions import annotate

CONTROLLER_NAMESPACE = "elastic-job"
CONTROLLER_NAME = "elastic-job-k8s-controller"
# Distroless "nonroot" user of the controller image and of etcd's distroless base.
NONROOT_UID = 65532
ETCD_SERVICE = "etcd-service"
ETCD_CLIENT_PORT = 2379
ETCD_DATA_MOUNT = "/var/lib/etcd"
CRD_FILE = Path(__file__).resolve().parent.parent / "manifests" / "elasticjob-crd.yaml"
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
ETCD_SELECTOR = {"app.kubernetes.io/name": "etcd"}
# Labels of the training worker pods (the ElasticJob's pod template; the controller copies them
# onto every worker pod). workloads.py builds the pods with them; the NetworkPolicies here admit them.
TRAINING_COMPONENT = "training"
JOB_LABEL = "elastic-training/job"
TRAINING_PODS = {"matchLabels": {"app.kubernetes.io/component": TRAINING_COMPONENT},
                 "matchExpressions": [{"key": JOB_LABEL, "operator": "Exists"}]}


def _labels(component: str, name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, **common_labels(component)}


def _meta(name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": _labels(component, name)}
    if namespace:
        meta["namespace"] = namespace
    return meta


@cache
def _crd_document() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text())


def elasticjob_crd() -> dict[str, Any]:
    crd = yaml.safe_load(yaml.safe_dump(_crd_document()))  # a copy callers may change
    crd["metadata"]["labels"] = _labels("elastic-controller", "elasticjobs")
    return crd


def elasticjob_schema() -> dict[str, Any]:
    """The openAPIV3Schema of our ElasticJob version, for validating rendered ElasticJobs."""
    return _crd_document()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


# The Pod Security level each namespace enforces (both warn and audit on "restricted").
# - The controller's namespace: its only pod comes from our Deployment, which the API server's own
#   controllers turn into pods from the full template, so "restricted" holds.
# - The workload namespace: the TorchElastic controller creates the training pods itself, through
#   k8s.io/api v0.15.10 types (pytorch/elastic kubernetes/go.mod), which have no seccompProfile
#   (added in Kubernetes 1.19): every worker pod arrives without one, and "restricted" refuses a pod
#   whose seccomp profile is unset. "baseline" admits it (it forbids only an explicit Unconfined);
#   the nodes' kubelet runs every container without a profile under RuntimeDefault
#   (seccompDefault, infra/specs/node_config.py), so the pods still run confined.
CONTROLLER_NAMESPACE_ENFORCE = RESTRICTED
WORKLOAD_NAMESPACE_ENFORCE = BASELINE


def namespace(name: str, component: str, enforce: str) -> dict[str, Any]:
    meta = _meta(name, component)
    meta["labels"].update(pod_security_labels(enforce))
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def controller_objects() -> list[dict[str, Any]]:
    """ServiceAccount, RBAC and Deployment of the controller, in apply order."""
    component = "elastic-controller"
    ns = CONTROLLER_NAMESPACE
    subject = [{"kind": "ServiceAccount", "name": CONTROLLER_NAME, "namespace": ns}]
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(CONTROLLER_NAME, component, ns),
                       "automountServiceAccountToken": True}
    cluster_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": _meta(f"{CONTROLLER_NAME}-role", component),
        "rules": [
            {"apiGroups": [""], "resources": ["events", "pods", "services"], "verbs": VERBS},
            {"apiGroups": ["elastic.pytorch.org"], "resources": ["elasticjobs"], "verbs": VERBS},
            {"apiGroups": ["elastic.pytorch.org"], "resources": ["elasticjobs/status"], "verbs": ["get", "patch", "update"]},
        ],
    }
    cluster_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": _meta(f"{CONTROLLER_NAME}-rolebinding", component),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{CONTROLLER_NAME}-role"},
        "subjects": subject,
    }
    # controller-runtime 0.3 elects its leader with a ConfigMap lock in its own namespace.
    election_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": _meta("leader-election-role", component, ns),
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["configmaps/status"], "verbs": ["get", "update", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        ],
    }
    election_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": _meta("leader-election-rolebinding", component, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leader-election-role"},
        "subjects": subject,
    }
    selector = {"app.kubernetes.io/name": CONTROLLER_NAME}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(CONTROLLER_NAME, component, ns),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels(component, CONTROLLER_NAME)},
                "spec": {
                    "serviceAccountName": CONTROLLER_NAME,
                    "securityContext": pod_security_context(NONROOT_UID, NONROOT_UID),
                    "terminationGracePeriodSeconds": 10,
                    # The image is built for amd64 only.
                    "nodeSelector": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
                    "containers": [{
                        "name": "manager",
                        "image": versions.ELASTIC_CONTROLLER_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["/manager"],
                        "args": ["--enable-leader-election"],
                        # Upstream's 30Mi limit is too tight once it watches pods in every namespace.
                        "resources": resources("100m", "128Mi"),
                        "securityContext": container_security_context(),
                    }],
                },
            },
        },
    }
    return [annotate(obj) for obj in (service_account, cluster_role, cluster_binding, election_role, election_binding, deployment)]


def etcd_objects(namespace_name: str, storage_class_name: str) -> list[dict[str, Any]]:
    """etcd 3.5 with the v2 API, one member, its data on a volume that outlives the pod (the claim
    of `storage_class_name`), at a priority above the workloads, behind a disruption budget
    (rendezvous_store.py). The workers outlast a restart of it either way (jobs/rendezvous.py)."""
    component = "rendezvous"
    selector = ETCD_SELECTOR
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(ETCD_SERVICE, component, namespace_name),
        "spec": {"selector": selector,
                 "ports": [{"name": "etcd-client-port", "port": ETCD_CLIENT_PORT, "targetPort": ETCD_CLIENT_PORT, "protocol": "TCP"}]},
    }
    health = {"httpGet": {"path": "/health", "port": ETCD_CLIENT_PORT}, "timeoutSeconds": 2}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta("etcd", component, namespace_name),
        "spec": {
            "replicas": 1,
            # The old pod ends (and releases the volume) before the new one starts.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels(component, "etcd")},
                "spec": {
                    "automountServiceAccountToken": False,
                    "priorityClassName": rendezvous_store.PRIORITY_CLASS,
                    # etcd stops in well under a second on SIGTERM; a stuck one is not waited for long.
                    "terminationGracePeriodSeconds": 10,
                    # Off a dead node after 30 s, not the 300 s the DefaultTolerationSeconds admission
                    # plugin gives: its volume then needs the attach-detach controller's 6 minutes
                    # (maxWaitForUnmountDuration) to follow, and the workers wait 10 (jobs/rendezvous.py).
                    "tolerations": [{"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute",
                                     "tolerationSeconds": 30} for taint in ("not-ready", "unreachable")],
                    "securityContext": {**pod_security_context(NONROOT_UID, NONROOT_UID),
                                        # the volume is chowned once, not at every start
                                        "fsGroupChangePolicy": "OnRootMismatch"},
                    "containers": [{
                        "name": "etcd",
                        "image": versions.ETCD_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["/usr/local/bin/etcd"],
                        "args": [
                            # A directory of its own in the volume: etcd wants its data directory
                            # 0700, and the volume's root belongs to the fsGroup.
                            f"--data-dir={ETCD_DATA_MOUNT}/data",
                            "--enable-v2=true",
                            f"--listen-client-urls=http://0.0.0.0:{ETCD_CLIENT_PORT}",
                            f"--advertise-client-urls=http://{ETCD_SERVICE}:{ETCD_CLIENT_PORT}",
                            "--initial-cluster-state=new",
                        ],
                        "ports": [{"name": "client", "containerPort": ETCD_CLIENT_PORT, "protocol": "TCP"}],
                        # Ready (in the Service) within a second or two of answering; live once started.
                        "startupProbe": {**health, "periodSeconds": 1, "failureThreshold": 120},
                        "readinessProbe": {**health, "periodSeconds": 2},
                        "livenessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
                        "resources": resources("250m", "256Mi"),
                        "securityContext": container_security_context(),
                        "volumeMounts": [{"name": "data", "mountPath": ETCD_DATA_MOUNT}],
                    }],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": rendezvous_store.DATA_CLAIM}}],
                },
            },
        },
    }
    return [annotate(service), rendezvous_store.data_claim(namespace_name, storage_class_name),
            rendezvous_store.disruption_budget(namespace_name, selector), annotate(deployment)]


def rendezvous_endpoint() -> str:
    return f"{ETCD_SERVICE}:{ETCD_CLIENT_PORT}"


# --- NetworkPolicies: ingress to our pods only from where it is needed ---------------------------
# Enforced only where the cluster's CNI enforces NetworkPolicies: cluster.py turns on the VPC CNI's
# network policy agent. Egress is left open (data-prep downloads from the internet, every pod
# resolves names through CoreDNS); see docs/security.md.

def _network_policy(name: str, component: str, namespace_name: str, pod_selector: dict[str, Any],
                    ingress: list[dict[str, Any]]) -> dict[str, Any]:
    # No rules is written as no `ingress` field (the same policy: policyTypes still lists Ingress): the
    # API server drops an empty list, so `ingress: []` would read back different from what was sent
    # (tests/cluster/test_every_object_applies.py).
    spec: dict[str, Any] = {"podSelector": pod_selector, "policyTypes": ["Ingress"]}
    if ingress:
        spec["ingress"] = ingress
    return annotate({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": _meta(name, component, namespace_name), "spec": spec,
    })


def deny_ingress_policy(namespace_name: str, component: str) -> dict[str, Any]:
    """No ingress to any pod of this project in the namespace, except what another policy admits
    (policies add up). It selects our pods by label rather than with `podSelector: {}`: the two
    are the same for the pods we create, and checkov's NetworkPolicy check only links a policy to
    pods through matchLabels."""
    return _network_policy("deny-ingress", component, namespace_name,
                           {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}, [])


def controller_network_policies() -> list[dict[str, Any]]:
    """The controller serves nothing anyone needs (only its unauthenticated /metrics on :8080)."""
    return [deny_ingress_policy(CONTROLLER_NAMESPACE, "elastic-controller")]


def workload_network_policies(namespace_name: str) -> list[dict[str, Any]]:
    """etcd (no authentication: whoever reaches it can read and rewrite the rendezvous) is
    reachable only from training workers, on its client port; training workers reach each other
    on any port (torchrun's TCPStore and gloo pick ports at run time); data-prep and test Jobs
    take no ingress at all."""
    etcd = _network_policy("etcd-from-training", "rendezvous", namespace_name, {"matchLabels": ETCD_SELECTOR},
                           [{"from": [{"podSelector": TRAINING_PODS}],
                             "ports": [{"protocol": "TCP", "port": ETCD_CLIENT_PORT}]}])
    peers = _network_policy("training-peers", TRAINING_COMPONENT, namespace_name,
                            {"matchLabels": {"app.kubernetes.io/component": TRAINING_COMPONENT}},
                            [{"from": [{"podSelector": TRAINING_PODS}]}])
    return [deny_ingress_policy(namespace_name, "workloads"), etcd, peers]
