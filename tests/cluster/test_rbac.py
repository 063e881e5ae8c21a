"""Issue 29, test 4 (RBAC): the controller's and the workers' ServiceAccounts can do what they need and
nothing more, asked of the real RBAC authorizer (`kubectl auth can-i --as`, a SubjectAccessReview)
with the `dev` stack's rendered RBAC objects applied.

What the controller needs is what the archived TorchElastic controller does (pytorch/elastic
kubernetes/controllers/elasticjob_controller.go kubebuilder:rbac markers, and its pods, services and
events through kubeflow/common's job controller, @ bc88e6982961): read and update ElasticJobs and their
status, create, watch and delete the worker pods and their headless services, record events, and
elect a leader with a ConfigMap lock in its own namespace (controller-runtime v0.3
pkg/leaderelection). The workers and the Jobs run with no API token at all
(automountServiceAccountToken: false on every pod template but the controller's): their
ServiceAccounts, and the export Job's, may do nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kube import CRD, apply, delete, kind_rank, wait_established

CONTROLLER = "system:serviceaccount:elastic-job:elastic-job-k8s-controller"
WORKLOAD_NAMESPACE = "training"
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", CRD)

NEEDED = [
    (CONTROLLER, verb, "elasticjobs.elastic.pytorch.org", WORKLOAD_NAMESPACE)
    for verb in ("get", "list", "watch", "update", "patch")
] + [
    (CONTROLLER, verb, "elasticjobs.elastic.pytorch.org/status", WORKLOAD_NAMESPACE) for verb in ("update", "patch")
] + [
    (CONTROLLER, verb, resource, WORKLOAD_NAMESPACE)
    for resource in ("pods", "services") for verb in ("create", "get", "list", "watch", "delete")
] + [
    (CONTROLLER, "create", "events", WORKLOAD_NAMESPACE),
    (CONTROLLER, "patch", "events", WORKLOAD_NAMESPACE),
] + [
    (CONTROLLER, verb, "configmaps", "elastic-job") for verb in ("get", "create", "update")
]

FORBIDDEN = [
    (CONTROLLER, verb, resource, namespace)
    for verb, resource, namespace in (
        ("get", "secrets", WORKLOAD_NAMESPACE), ("list", "secrets", "kube-system"), ("get", "secrets", "elastic-job"),
        ("create", "pods/exec", WORKLOAD_NAMESPACE), ("create", "pods/attach", WORKLOAD_NAMESPACE),
        ("create", "serviceaccounts/token", WORKLOAD_NAMESPACE),
        ("create", "deployments.apps", WORKLOAD_NAMESPACE), ("create", "jobs.batch", WORKLOAD_NAMESPACE),
        ("update", "configmaps", WORKLOAD_NAMESPACE), ("update", "configmaps", "kube-system"),
        ("create", "rolebindings.rbac.authorization.k8s.io", WORKLOAD_NAMESPACE),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", ""),
        ("escalate", "clusterroles.rbac.authorization.k8s.io", ""), ("bind", "clusterroles.rbac.authorization.k8s.io", ""),
        ("impersonate", "serviceaccounts", WORKLOAD_NAMESPACE),
        ("list", "nodes", ""), ("delete", "namespaces", ""),
        ("update", "customresourcedefinitions.apiextensions.k8s.io", ""),
    )
] + [
    (f"system:serviceaccount:{WORKLOAD_NAMESPACE}:{account}", verb, resource, WORKLOAD_NAMESPACE)
    for account in ("default", "export")
    for verb, resource in (("get", "pods"), ("list", "pods"), ("get", "secrets"), ("create", "pods"),
                           ("get", "elasticjobs.elastic.pytorch.org"), ("get", "configmaps"), ("list", "services"))
]


@pytest.fixture(scope="module")
def dev_rbac(rendered, control_plane):
    """The dev stack's namespaces, ServiceAccounts, RBAC and CRD, applied; deleted afterwards."""
    objects = sorted((m for m in rendered["dev"].manifests if m["kind"] in RBAC_KINDS), key=kind_rank)
    apply(control_plane, objects)
    wait_established(control_plane, [o["metadata"]["name"] for o in objects if o["kind"] == CRD])
    yield
    delete(control_plane, objects)


def can(plane, user: str, verb: str, resource: str, namespace: str) -> bool:
    # `can-i VERB TYPE/NAME` reads a slash as a name: a subresource goes in --subresource.
    resource, _, subresource = resource.partition("/")
    args = ["auth", "can-i", verb, resource, f"--as={user}"] + ([f"--subresource={subresource}"] if subresource else [])
    args += [f"--namespace={namespace}"] if namespace else []
    result = plane.kubectl(*args, check=False)
    assert result.stdout.strip() in ("yes", "no"), result.stderr
    return result.stdout.strip() == "yes"


def answers(plane, matrix) -> list[bool]:
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda row: can(plane, *row), matrix))


def test_the_controller_can_do_what_it_needs(dev_rbac, control_plane):
    missing = [f"{user} {verb} {resource} -n {ns}" for (user, verb, resource, ns), yes
               in zip(NEEDED, answers(control_plane, NEEDED)) if not yes]
    assert not missing, "denied, but needed:\n" + "\n".join(missing)


def test_no_service_account_can_do_more(dev_rbac, control_plane):
    allowed = [f"{user} {verb} {resource}{' -n ' + ns if ns else ''}" for (user, verb, resource, ns), yes
               in zip(FORBIDDEN, answers(control_plane, FORBIDDEN)) if yes]
    assert not allowed, "allowed, but not needed:\n" + "\n".join(allowed)
