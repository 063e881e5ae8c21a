"""The ElasticJob CRD, our ElasticJob controller (RBAC, Deployment: controller/), and the etcd torchrun rendezvous on."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from infra import versions
from infra.specs import rendezvous_store
from infra.specs.labels import PART_OF, common_labels
from infra.specs.security import (RESTRICTED, container_security_context, pod_security_context, pod_security_labels,
                                  resources)
from infra.specs.suppressions import annotate

CONTROLLER_NAME = "elasticjob-controller"
# Where the controller mounts the shared volume, read-only, to read each run's history.jsonl: the
# workers' own mount path (workloads.MOUNT_PATH), so the run directory in their args is a path there too.
CONTROLLER_SHARED_MOUNT = "/efs-shared"
# Distroless "nonroot" user of etcd's distroless base.
NONROOT_UID = 65532
ETCD_SERVICE = "etcd-service"
ETCD_CLIENT_PORT = 2379
ETCD_DATA_MOUNT = "/var/lib/etcd"
CRD_FILE = Path(__file__).resolve().parent.parent / "manifests" / "elasticjob-crd.yaml"
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


# The workload namespace enforces "restricted" (warn and audit too): every pod in it, the
# controller's and the training workers' included, comes from a template we render in full; our
# controller (controller/, issue 33) hands the worker template to a native Job unchanged, so pods keep
# every field, seccompProfile included (the archived controller's 1.15 types dropped it, which
# is why this was "baseline" before).
WORKLOAD_NAMESPACE_ENFORCE = RESTRICTED


def namespace(name: str, component: str, enforce: str) -> dict[str, Any]:
    meta = _meta(name, component)
    meta["labels"].update(pod_security_labels(enforce))
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def controller_role_rules() -> list[dict[str, Any]]:
    """Least privilege, in the workload namespace only (controller/reconcile.py says what each is for):
    ElasticJobs read and watched, their status patched, never their spec; Jobs created, replaced
    (delete) and watched; pods read, watched and deleted (cleanPodPolicy All), never created: the Job
    controller creates them; its own Lease. `elasticjobs/finalizers` update: a Job's owner reference with
    blockOwnerDeletion needs it where the OwnerReferencesPermissionEnforcement admission plugin runs
    (Kubernetes docs, "Admission Control": OwnerReferencesPermissionEnforcement)."""
    return [
        {"apiGroups": ["elastic.pytorch.org"], "resources": ["elasticjobs"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": ["elastic.pytorch.org"], "resources": ["elasticjobs/status"], "verbs": ["get", "patch"]},
        {"apiGroups": ["elastic.pytorch.org"], "resources": ["elasticjobs/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
    ]


def controller_objects(namespace_name: str, image: Any, shared_claim: str, pull_policy: str = "IfNotPresent",
                       image_by_tag: bool = False) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding and Deployment of our ElasticJob controller (`python -m
    controller` in the training image `image`), in the workload namespace, in apply order. One
    replica: a second would only wait on the Lease; a new pod of a rollout takes the Lease over once
    the old one releases it on SIGTERM."""
    component = "elastic-controller"
    ns = namespace_name
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(CONTROLLER_NAME, component, ns),
                       "automountServiceAccountToken": True}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": _meta(CONTROLLER_NAME, component, ns), "rules": controller_role_rules()}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": _meta(CONTROLLER_NAME, component, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": CONTROLLER_NAME, "namespace": ns}],
    }
    selector = {"app.kubernetes.io/name": CONTROLLER_NAME}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(CONTROLLER_NAME, component, ns),
        "spec": {
            "replicas": 1,
            # The old pod releases the Lease on SIGTERM before the new one campaigns.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": _labels(component, CONTROLLER_NAME)},
                "spec": {
                    "serviceAccountName": CONTROLLER_NAME,
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": 10,
                    "containers": [{
                        "name": "controller",
                        "image": image,
                        "imagePullPolicy": pull_policy,
                        "command": ["python", "-m", "controller"],
                        "args": [f"--namespace={ns}", f"--shared-root={CONTROLLER_SHARED_MOUNT}"],
                        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
                        "resources": resources("100m", "256Mi"),
                        "securityContext": container_security_context(),
                        "volumeMounts": [{"name": "shared", "mountPath": CONTROLLER_SHARED_MOUNT, "readOnly": True}],
                    }],
                    "volumes": [{"name": "shared",
                                 "persistentVolumeClaim": {"claimName": shared_claim, "readOnly": True}}],
                },
            },
        },
    }
    return [annotate(service_account), annotate(role), annotate(binding), annotate(deployment, image_by_tag=image_by_tag)]


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
