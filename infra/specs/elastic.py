"""The ElasticJob CRD, our ElasticJob controller (RBAC, Deployment: controller/), and the rendezvous store
torchrun's agents rendezvous on (a TCPStore served by our own image: jobs/elastic/store_server.py, one pod of a
StatefulSet)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from elastic_training.elasticjob import GROUP, PLURAL
from infra.specs import rendezvous_store
from infra.specs.labels import named_labels, object_meta
from infra.specs.security import (
    RESTRICTED,
    container_security_context,
    pod_security_context,
    pod_security_labels,
    resources,
)
from infra.specs.suppressions import annotate

CONTROLLER_NAME = "elasticjob-controller"
# Where the controller mounts the shared volume, read-only, to read each run's history.jsonl: the
# workers' own mount path (workloads.MOUNT_PATH), so the run directory in their args is a path there too.
CONTROLLER_SHARED_MOUNT = "/efs-shared"
# Distroless "nonroot" user.
NONROOT_UID = 65532
# The rendezvous store: the training image's jobs.elastic.store_server (its user is the image's, 10001:
# images/Dockerfile), behind a Service of this name on torch's c10d port (29400, which
# jobs/elastic/rendezvous.py DEFAULT_PORT repeats; tests/specs/test_rendezvous_store_spec.py compares).
STORE_NAME = "rendezvous-store"
# The torchrun rendezvous backend the workers name (jobs/elastic/rendezvous.py BACKEND; a test compares).
RENDEZVOUS_BACKEND = "reconnecting-c10d"
STORE_PORT = 29400
STORE_UID = 10001
CRD_FILE = Path(__file__).resolve().parent.parent / "manifests" / "elasticjob-crd.yaml"
STORE_SELECTOR = {"app.kubernetes.io/name": STORE_NAME}


def _one_pod_deployment(
    name: str, component: str, namespace_name: str, selector: dict[str, str], pod_spec: dict[str, Any]
) -> dict[str, Any]:
    """A Deployment of one pod, replaced by Recreate in a rollout (the controller: its Lease, not the
    Deployment, keeps a second one from acting)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(name, component, namespace_name),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": named_labels(component, name)}, "spec": pod_spec},
        },
    }


@cache
def _crd_document() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))


def elasticjob_crd() -> dict[str, Any]:
    crd = yaml.safe_load(yaml.safe_dump(_crd_document()))  # a copy callers may change
    crd["metadata"]["labels"] = named_labels("elastic-controller", "elasticjobs")
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
    meta = object_meta(name, component)
    meta["labels"].update(pod_security_labels(enforce))
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


# The Lease the controller elects its leader on (controller/__main__.py LEASE_NAME; a test compares).
CONTROLLER_LEASE = "elastic-job-controller"


def controller_role_rules() -> list[dict[str, Any]]:
    """Least privilege, in the workload namespace only (controller/reconcile.py says what each is for):
    ElasticJobs read and watched, their status patched, never their spec; Jobs created, resized in
    place (patch), replaced (delete) and watched; pods read, watched and deleted (cleanPodPolicy All,
    orphaned workers), never created: the Job controller creates them; events listed (a Job's
    FailedCreate: the API's reason for refusing its pods); its own Lease only (get and
    update by name; create cannot be limited by name in RBAC). `elasticjobs/finalizers` update: a Job's
    owner reference with blockOwnerDeletion needs it where the OwnerReferencesPermissionEnforcement
    admission plugin runs (Kubernetes docs, "Admission Control": OwnerReferencesPermissionEnforcement).
    What Jobs it may create is narrowed further by controller_job_policy."""
    return [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch"]},
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "update"],
            "resourceNames": [CONTROLLER_LEASE],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]


def controller_job_policy(namespace_name: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding (admissionregistration.k8s.io/v1, GA since Kubernetes
    1.30) that narrow what the controller's ServiceAccount may do with the Jobs its Role lets it create
    (issue 36 item 14): without it, that account could run any pod in the namespace, one that mounts
    the namespace's Secrets included. A Job it creates or changes must be owned (as controller) by the
    ElasticJob of the same name, be the Indexed Job with a pod failure and success policy that
    controller/render.py renders, carry that ElasticJob's label on its pods, and its pods must take
    no Secret (no secret or projected-secret volume, no secretKeyRef or secretRef in any container's
    environment) and no API token (automountServiceAccountToken false, as every worker template we
    render). Requests of anyone else are not matched (matchConditions). An ElasticJob whose template
    needs a Secret is refused: the controller reports the API's message on it (reconcile.py)."""
    name = f"{CONTROLLER_NAME}-jobs-{namespace_name}"
    user = f"system:serviceaccount:{namespace_name}:{CONTROLLER_NAME}"
    pod = "object.spec.template.spec"
    no_secret_env = (
        "(!has(c.env) || c.env.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef))) && "
        "(!has(c.envFrom) || c.envFrom.all(e, !has(e.secretRef)))"
    )
    rules = [
        (
            "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.size() == 1 && "
            "object.metadata.ownerReferences.all(r, r.apiVersion == 'elastic.pytorch.org/v1alpha1' && "
            "r.kind == 'ElasticJob' && r.name == object.metadata.name && has(r.controller) && r.controller)",
            "the ElasticJob controller may only create Jobs owned by the ElasticJob of the same name",
        ),
        (
            "has(object.spec.completionMode) && object.spec.completionMode == 'Indexed' && "
            "has(object.spec.podFailurePolicy) && has(object.spec.successPolicy) && has(object.spec.backoffLimitPerIndex)",
            "the ElasticJob controller may only create the Indexed Jobs it renders (pod failure and success policy, "
            "backoffLimitPerIndex)",
        ),
        (
            "has(object.spec.template.metadata) && has(object.spec.template.metadata.labels) && "
            "'elastic.pytorch.org/elasticjob' in object.spec.template.metadata.labels && "
            "object.spec.template.metadata.labels['elastic.pytorch.org/elasticjob'] == object.metadata.name",
            "the pods of a Job the ElasticJob controller creates must carry its ElasticJob's label",
        ),
        (
            f"has({pod}.automountServiceAccountToken) && {pod}.automountServiceAccountToken == false",
            "the pods of a Job the ElasticJob controller creates get no API token (automountServiceAccountToken: false)",
        ),
        (
            f"!has({pod}.volumes) || {pod}.volumes.all(v, !has(v.secret) && "
            "(!has(v.projected) || !has(v.projected.sources) || v.projected.sources.all(s, !has(s.secret) && "
            "!has(s.serviceAccountToken))))",
            "the pods of a Job the ElasticJob controller creates mount no Secret",
        ),
        (
            f"{pod}.containers.all(c, {no_secret_env}) && "
            f"(!has({pod}.initContainers) || {pod}.initContainers.all(c, {no_secret_env}))",
            "the pods of a Job the ElasticJob controller creates read no Secret into their environment",
        ),
    ]
    namespace_selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace_name}}
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(name, "elastic-controller"),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": namespace_selector,
                "resourceRules": [
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["jobs"],
                    }
                ],
            },
            "matchConditions": [
                {"name": "the-elasticjob-controller", "expression": f"request.userInfo.username == '{user}'"}
            ],
            "validations": [{"expression": expression, "message": message} for expression, message in rules],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": object_meta(name, "elastic-controller"),
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": namespace_selector},
        },
    }
    return [policy, binding]


def controller_objects(
    namespace_name: str, image: Any, shared_claim: str, pull_policy: str = "IfNotPresent", image_by_tag: bool = False
) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding and Deployment of our ElasticJob controller (`python -m
    controller` in the training image `image`), in the workload namespace, in apply order. One
    replica: a second would only wait on the Lease; a new pod of a rollout takes the Lease over once
    the old one releases it on SIGTERM."""
    component = "elastic-controller"
    ns = namespace_name
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": object_meta(CONTROLLER_NAME, component, ns),
        "automountServiceAccountToken": True,
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": object_meta(CONTROLLER_NAME, component, ns),
        "rules": controller_role_rules(),
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(CONTROLLER_NAME, component, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": CONTROLLER_NAME, "namespace": ns}],
    }
    # Recreate: the old pod releases the Lease on SIGTERM before the new one campaigns.
    deployment = _one_pod_deployment(
        CONTROLLER_NAME,
        component,
        ns,
        {"app.kubernetes.io/name": CONTROLLER_NAME},
        {
            "serviceAccountName": CONTROLLER_NAME,
            "securityContext": pod_security_context(),
            "terminationGracePeriodSeconds": 10,
            "containers": [
                {
                    "name": "controller",
                    "image": image,
                    "imagePullPolicy": pull_policy,
                    "command": ["python", "-m", "controller"],
                    "args": [
                        f"--namespace={ns}",
                        f"--shared-root={CONTROLLER_SHARED_MOUNT}",
                        f"--shared-claim={shared_claim}",
                    ],
                    "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
                    "resources": resources("100m", "256Mi"),
                    "securityContext": container_security_context(),
                    "volumeMounts": [{"name": "shared", "mountPath": CONTROLLER_SHARED_MOUNT, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": shared_claim, "readOnly": True}}],
        },
    )
    return [
        annotate(service_account),
        annotate(role),
        annotate(binding),
        *(annotate(o) for o in controller_job_policy(ns)),
        annotate(deployment, image_by_tag=image_by_tag),
    ]


def store_objects(
    namespace_name: str, image: Any, pull_policy: str, image_by_tag: bool = False
) -> list[dict[str, Any]]:
    """The rendezvous store: one pod of the training image serving a TCPStore in memory (no volume,
    so any system node in any zone can run it), at a priority above the workloads, behind a
    disruption budget (rendezvous_store.py). A restart empties it and the agents put their state
    back (jobs/elastic/rendezvous.py); docs/design-notes.md, "Rendezvous store", says why this store."""
    component = "rendezvous"
    selector = STORE_SELECTOR
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(STORE_NAME, component, namespace_name),
        "spec": {
            "selector": selector,
            "ports": [{"name": "store", "port": STORE_PORT, "targetPort": STORE_PORT, "protocol": "TCP"}],
        },
    }
    # A TCP connect is what the store's clients do; the store answers it once its socket listens.
    listening = {"tcpSocket": {"port": STORE_PORT}, "timeoutSeconds": 2}
    # A StatefulSet of one, not a Deployment: never two stores at once (agents on two stores would form two
    # groups writing one run directory). A Deployment's ReplicaSet starts a new pod as soon as the old one
    # has a deletionTimestamp, still running on a node that stopped answering (upstream-facts-4 fact 10;
    # `Recreate` governs rollouts only); a StatefulSet starts ordinal 0 again only once the old pod is
    # gone from the API, which on a lost node takes the Node's removal (the cloud controller deletes a
    # NotReady Node whose instance no longer exists: k8s.io/cloud-provider controllers/nodelifecycle
    # MonitorNodes, v0.35.8; then the pod garbage collector deletes its pods) or an operator's word
    # (docs/troubleshooting.md). tests/cluster/test_store_never_twice.py shows both on a control plane.
    pod_spec = {
        "automountServiceAccountToken": False,
        "priorityClassName": rendezvous_store.PRIORITY_CLASS,
        # It stops at once on SIGTERM; a stuck one is not waited for long.
        "terminationGracePeriodSeconds": 10,
        # Kept on a node that stops answering, however long (no tolerationSeconds; the DefaultTolerationSeconds
        # admission plugin adds its 300 s only to a pod without these). Evicting a StatefulSet's pod there moves
        # nothing: it is a graceful delete (tainteviction/taint_eviction.go, v1.35.8) no kubelet confirms, and the
        # StatefulSet waits until the pod is gone (stateful_set_control.go). It would only kill, emptied, the
        # store of a node that comes back (review rdzv-1 item 3). A lost node's pod goes when its Node is deleted
        # (the pod garbage collector's orphan pass, podgc/gc_controller.go); the out-of-service taint still evicts.
        "tolerations": [
            {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute"}
            for taint in ("not-ready", "unreachable")
        ],
        "securityContext": pod_security_context(STORE_UID, STORE_UID),
        "containers": [
            {
                "name": "store",
                "image": image,
                "imagePullPolicy": pull_policy,
                "command": ["python", "-m", "jobs.elastic.store_server"],
                "args": ["--host=0.0.0.0", f"--port={STORE_PORT}"],
                "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
                "ports": [{"name": "store", "containerPort": STORE_PORT, "protocol": "TCP"}],
                # Python and torch load in seconds; ready (in the Service) as soon as it listens.
                "startupProbe": {**listening, "periodSeconds": 1, "failureThreshold": 120},
                "readinessProbe": {**listening, "periodSeconds": 2},
                "livenessProbe": {**listening, "periodSeconds": 10, "failureThreshold": 3},
                # torch's import is most of its memory; the runs' keys are kilobytes.
                "resources": resources("100m", "512Mi"),
                "securityContext": container_security_context(),
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            }
        ],
        # The root filesystem is read-only; /tmp for whatever torch writes there.
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_meta(STORE_NAME, component, namespace_name),
        "spec": {
            "replicas": 1,
            # The Service above; the pod's DNS name under it is not used (the agents use the Service's).
            "serviceName": STORE_NAME,
            # The default, written out: an update deletes the pod and starts the new one once it is gone.
            "updateStrategy": {"type": "RollingUpdate"},
            # Not the default OrderedReady, under which a pod that is not Running and Ready (Pending,
            # ImagePullBackOff, CrashLoopBackOff) stops the controller before the rolling update that would
            # replace it with a fixed template (processReplica returns while `monotonic`:
            # pkg/controller/statefulset/stateful_set_control.go, v1.35.8; review rdzv-1 item 1). Parallel
            # cannot start two stores either: the new pod has the old one's name (rendezvous-store-0) and is
            # created only once the old is gone from the API. Immutable once the StatefulSet exists.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": named_labels(component, STORE_NAME)}, "spec": pod_spec},
        },
    }
    return [
        annotate(service),
        rendezvous_store.disruption_budget(namespace_name, selector),
        annotate(statefulset, image_by_tag=image_by_tag),
    ]


def rendezvous_endpoint() -> str:
    return f"{STORE_NAME}:{STORE_PORT}"
