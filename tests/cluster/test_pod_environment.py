"""The pod runner's view of a container (scripts/pod_environment.py): Kubernetes' $(VAR) expansion, the
downward API, and the rewriting that stands in for a container's file system and network."""

from __future__ import annotations

import base64

import pytest

from pod_environment import Rewriter, container_env, expand, field_value

POD = {
    "metadata": {"name": "train-0-abc", "namespace": "training", "uid": "u-1", "labels": {"app": "x"}},
    "spec": {"nodeName": "node-a", "serviceAccountName": "sa", "containers": []},
    "status": {"podIP": "127.1.0.2", "hostIP": "127.0.0.1"},
}


def test_expansion_follows_kubernetes_rules():
    env = {"POD_IP": "127.1.0.2"}
    assert expand("--local_addr=$(POD_IP)", env) == "--local_addr=127.1.0.2"
    assert expand("$(UNSET) stays", env) == "$(UNSET) stays"
    assert expand("$$(POD_IP) is escaped", env) == "$(POD_IP) is escaped"


def test_the_downward_api_fields():
    assert field_value(POD, "status.podIP") == "127.1.0.2"
    assert field_value(POD, "metadata.name") == "train-0-abc"
    assert field_value(POD, "metadata.namespace") == "training"
    assert field_value(POD, "metadata.labels['app']") == "x"
    with pytest.raises(ValueError, match="downward API"):
        field_value(POD, "spec.nothing")


def test_env_in_order_with_references_and_sources():
    data = {
        ("ConfigMap", "training", "cm"): {"A": "from-cm"},
        ("Secret", "training", "s"): {"K": base64.b64encode(b"secret").decode()},
    }
    container = {
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "ADDR", "value": "$(POD_IP):29500"},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "K"}}},
            {"name": "MISSING", "valueFrom": {"configMapKeyRef": {"name": "none", "key": "x", "optional": True}}},
        ],
    }
    env = container_env(POD, container, lambda kind, ns, name: data.get((kind, ns, name)), {"HOME": "/tmp"})
    assert env == {"HOME": "/tmp", "CM_A": "from-cm", "POD_IP": "127.1.0.2", "ADDR": "127.1.0.2:29500", "KEY": "secret"}
    with pytest.raises(LookupError, match="ConfigMap training/none"):
        container_env(
            POD,
            {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "none", "key": "x"}}}]},
            lambda *_: None,
        )


def test_mount_paths_service_names_and_the_wildcard_are_rewritten():
    rewrite = Rewriter(
        "/pods/p/root", ["/efs-shared", "/tmp", "/dev/shm"], "training", {"rendezvous-store": "127.2.0.1"}, "127.1.0.2"
    )
    assert rewrite("--rdzv_endpoint=rendezvous-store:29400") == "--rdzv_endpoint=127.2.0.1:29400"
    assert rewrite("rendezvous-store.training.svc.cluster.local:29400") == "127.2.0.1:29400"
    assert rewrite("http://rendezvous-store/x") == "http://127.2.0.1/x"
    assert rewrite("/efs-shared/runs/local-1") == "/pods/p/root/efs-shared/runs/local-1"
    assert rewrite("--shared-root=/efs-shared") == "--shared-root=/pods/p/root/efs-shared"
    assert rewrite("/tmp") == "/pods/p/root/tmp"
    assert rewrite('open("/tmp/x")') == 'open("/pods/p/root/tmp/x")'
    assert rewrite("open('/tmp')") == "open('/pods/p/root/tmp')"
    assert rewrite("--host=0.0.0.0") == "--host=127.1.0.2"
    # One pass: a root that itself starts with a mount path is not rewritten again.
    under_tmp = Rewriter("/tmp/plane/pods/p/root", ["/efs-shared", "/tmp"], "training", {}, "127.1.0.2")
    assert under_tmp("/efs-shared/data") == "/tmp/plane/pods/p/root/efs-shared/data"
    # Not a mount path or a name where only part of a word or path matches.
    for unchanged in (
        "/a/tmp",
        "/tmpfile",
        "/efs-shared-other",
        "my-rendezvous-store:1",
        "/x/rendezvous-store/y",
        "10.0.0.0",
        "rendezvous-store-2:1",
    ):
        assert rewrite(unchanged) == unchanged, unchanged


def test_the_runtimes_host_paths_are_never_rewritten_even_under_a_mount_path():
    """A checkout under /tmp (a fresh clone there runs the test command) and a pod that mounts /tmp: PATH
    and PYTHONPATH name this machine's checkout, not the container's /tmp, so they are kept; the pod's own
    values are rewritten (found by `.ci/run` from a clone in /tmp: every pod mounting /tmp could not find
    `python`)."""
    from pod_environment import rewritten_env

    rewrite = Rewriter("/pods/p/root", ["/tmp"], "training", {}, "127.1.0.2")
    base = {"PATH": "/tmp/ci/.venv/bin:/usr/bin", "PYTHONPATH": "/tmp/ci/scripts/pod_site:/tmp/ci", "HOME": "/tmp"}
    env = dict(base, TMP_USE="/tmp/scratch")
    assert rewritten_env(env, base, rewrite) == {
        "PATH": "/tmp/ci/.venv/bin:/usr/bin",
        "PYTHONPATH": "/tmp/ci/scripts/pod_site:/tmp/ci",
        "HOME": "/pods/p/root/tmp",
        "TMP_USE": "/pods/p/root/tmp/scratch",
    }
    # A PATH the pod sets itself is the container's: rewritten like any value of its own.
    assert rewritten_env(dict(base, PATH="/tmp/bin"), base, rewrite)["PATH"] == "/pods/p/root/tmp/bin"
