"""Issue 29, test 4 (RBAC): the controller's and the workers' ServiceAccounts can do what they need and
nothing more, asked of the real RBAC authorizer (`kubectl auth can-i --as`, a SubjectAccessReview)
with the `dev` stack's rendered RBAC objects applied.

What the controller needs is what ours does (controller/reconcile.py, controller/__main__.py,
controller/lease.py; issue 33), in the workload namespace only: read and watch ElasticJobs, delete one
past its ttlSecondsAfterFinished, patch their status (never their spec), create, watch and delete
their Jobs, read, watch and delete pods (cleanPodPolicy All) but never create one (the Job controller
does), and elect a leader on a Lease. tests/cluster/test_controller_runs.py runs it with exactly this
Role; issue 36 item 14: what its Role lets it create is narrowed by a ValidatingAdmissionPolicy (infra/specs/
elastic.py controller_job_policy) to the Jobs the controller renders, shown here by the API server's
own answer to the controller's account. The workers and the Jobs run with no API token at all
(automountServiceAccountToken: false on every pod template but the controller's): their
ServiceAccounts, and the export Job's, may do nothing.
"""

from __future__ import annotations

import copy
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from kube import CRD, apply, delete, kind_rank, wait_established, wait_until

CONTROLLER = "system:serviceaccount:training:elasticjob-controller"
WORKLOAD_NAMESPACE = "training"
RBAC_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    CRD,
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)

NEEDED = (
    [
        (CONTROLLER, verb, "elasticjobs.elastic.pytorch.org", WORKLOAD_NAMESPACE)
        for verb in ("get", "list", "watch", "delete")
    ]
    + [
        (CONTROLLER, "patch", "elasticjobs.elastic.pytorch.org/status", WORKLOAD_NAMESPACE),
        (CONTROLLER, "update", "elasticjobs.elastic.pytorch.org/finalizers", WORKLOAD_NAMESPACE),
    ]
    + [
        (CONTROLLER, verb, "jobs.batch", WORKLOAD_NAMESPACE)
        for verb in ("create", "get", "list", "watch", "patch", "delete")
    ]
    + [(CONTROLLER, verb, "pods", WORKLOAD_NAMESPACE) for verb in ("get", "list", "watch", "delete")]
    + [
        (CONTROLLER, "list", "events", WORKLOAD_NAMESPACE),
    ]
    + [
        (
            CONTROLLER,
            "create",
            "leases.coordination.k8s.io",
            WORKLOAD_NAMESPACE,
        )  # get, update: its own Lease only (below)
    ]
)

FORBIDDEN = [
    (CONTROLLER, verb, resource, namespace)
    for verb, resource, namespace in (
        ("get", "secrets", WORKLOAD_NAMESPACE),
        ("list", "secrets", "kube-system"),
        ("create", "pods", WORKLOAD_NAMESPACE),
        ("get", "pods", "kube-system"),
        ("list", "pods", ""),
        ("update", "elasticjobs.elastic.pytorch.org", WORKLOAD_NAMESPACE),
        ("patch", "elasticjobs.elastic.pytorch.org", WORKLOAD_NAMESPACE),
        ("create", "pods/exec", WORKLOAD_NAMESPACE),
        ("create", "pods/attach", WORKLOAD_NAMESPACE),
        ("create", "serviceaccounts/token", WORKLOAD_NAMESPACE),
        ("create", "deployments.apps", WORKLOAD_NAMESPACE),
        ("create", "jobs.batch", "kube-system"),
        ("update", "configmaps", WORKLOAD_NAMESPACE),
        ("update", "configmaps", "kube-system"),
        ("create", "rolebindings.rbac.authorization.k8s.io", WORKLOAD_NAMESPACE),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", ""),
        ("escalate", "clusterroles.rbac.authorization.k8s.io", ""),
        ("bind", "clusterroles.rbac.authorization.k8s.io", ""),
        ("impersonate", "serviceaccounts", WORKLOAD_NAMESPACE),
        ("list", "nodes", ""),
        ("delete", "namespaces", ""),
        ("update", "customresourcedefinitions.apiextensions.k8s.io", ""),
    )
] + [
    (f"system:serviceaccount:{WORKLOAD_NAMESPACE}:{account}", verb, resource, WORKLOAD_NAMESPACE)
    for account in ("default", "export")
    for verb, resource in (
        ("get", "pods"),
        ("list", "pods"),
        ("get", "secrets"),
        ("create", "pods"),
        ("get", "elasticjobs.elastic.pytorch.org"),
        ("get", "configmaps"),
        ("list", "services"),
    )
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
    missing = [
        f"{user} {verb} {resource} -n {ns}"
        for (user, verb, resource, ns), yes in zip(NEEDED, answers(control_plane, NEEDED))
        if not yes
    ]
    assert not missing, "denied, but needed:\n" + "\n".join(missing)


def test_no_service_account_can_do_more(dev_rbac, control_plane):
    allowed = [
        f"{user} {verb} {resource}{' -n ' + ns if ns else ''}"
        for (user, verb, resource, ns), yes in zip(FORBIDDEN, answers(control_plane, FORBIDDEN))
        if yes
    ]
    assert not allowed, "allowed, but not needed:\n" + "\n".join(allowed)


def test_the_lease_rule_names_the_controllers_lease(dev_rbac, control_plane):
    """Issue 36 item 7: get and update of its own Lease only (create cannot be limited by name)."""

    def can_named(verb: str, lease: str) -> bool:
        result = control_plane.kubectl(
            "auth",
            "can-i",
            verb,
            f"leases.coordination.k8s.io/{lease}",
            f"--as={CONTROLLER}",
            f"--namespace={WORKLOAD_NAMESPACE}",
            check=False,
        )
        assert result.stdout.strip() in ("yes", "no"), result.stderr
        return result.stdout.strip() == "yes"

    assert can_named("update", "elastic-job-controller") and can_named("get", "elastic-job-controller")
    assert not can_named("update", "another-lease") and not can_named("get", "kube-controller-manager")


def _as_controller_dry_run(plane, job: dict) -> subprocess.CompletedProcess:
    """The controller's account creating `job`, admission and all, stored nowhere (server-side dry run)."""
    return plane.kubectl(
        "create", "--dry-run=server", f"--as={CONTROLLER}", "-f", "-", "-o", "name", input=json.dumps(job), check=False
    )


def test_the_controller_may_create_only_the_jobs_it_renders(dev_rbac, control_plane, rendered):
    """Issue 36 item 14: its Role lets it create Jobs; the admission policy refuses any Job that is not
    an ElasticJob's Job as the controller renders it, or that would give a pod a Secret or a token."""
    from controller import render

    plane = control_plane
    elasticjob = next(m for m in rendered["dev"].manifests if m["kind"] == "ElasticJob")
    elasticjob = copy.deepcopy(elasticjob)
    elasticjob["metadata"].update(namespace=WORKLOAD_NAMESPACE, uid="0" * 8 + "-0000-0000-0000-" + "0" * 12)
    ours = render.job(elasticjob)
    # the policy is compiled and bound a moment after it is created: wait for its first refusal
    plain = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "not-ours", "namespace": WORKLOAD_NAMESPACE},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    refused = wait_until(
        "the policy refuses a Job no ElasticJob owns",
        lambda: (r := _as_controller_dry_run(plane, plain)).returncode != 0 and "denied request" in r.stderr and r,
        timeout=60,
        every=1,
    )
    assert "may only create Jobs owned by the ElasticJob of the same name" in refused.stderr, refused.stderr
    # the Job the controller renders passes
    result = _as_controller_dry_run(plane, ours)
    assert result.returncode == 0, result.stderr
    # the same Job with a Secret mounted, read into the environment, or a token: refused
    secret_volume = copy.deepcopy(ours)
    pod = secret_volume["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "keys", "secret": {"secretName": "anything"}})
    secret_env = copy.deepcopy(ours)
    secret_env["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "anything", "key": "k"}}}
    )
    token = copy.deepcopy(ours)
    token["spec"]["template"]["spec"]["automountServiceAccountToken"] = True
    for job, message in (
        (secret_volume, "mount no Secret"),
        (secret_env, "read no Secret into their environment"),
        (token, "get no API token"),
    ):
        result = _as_controller_dry_run(plane, job)
        assert result.returncode != 0 and message in result.stderr, result.stderr
    # an administrator's request is not the policy's business
    assert (
        plane.kubectl(
            "create", "--dry-run=server", "-f", "-", "-o", "name", input=json.dumps(plain), check=False
        ).returncode
        == 0
    )
