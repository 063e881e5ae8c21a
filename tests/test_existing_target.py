"""target existing (issue 10): the same Kubernetes objects in a cluster someone already runs, and
nothing in AWS: no resource, no invoke, no region.

The program runs under the recording mocks in one subprocess per target (the mocks are global to a
process); `dev` (target eks) is the control that shows the same recording does see AWS invokes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from infra.config import (
    EKS,
    EXISTING,
    PROJECT,
    READ_WRITE_ONCE,
    ConfigError,
    image_pull_policy,
    load_settings,
    pins_the_image,
)
from infra.specs import workloads as specs
from infra.config.stack_file import read_stack_file
from synth_support import REPO

P = PROJECT
IMAGE = "docker.io/library/elastic-training:local"


def recorded(stack: str) -> dict:
    """Every registration type and every invoke token of the whole program for `stack`."""
    script = textwrap.dedent(f"""
        import json, pulumi
        from infra.config import load_settings
        from infra.cli.mocks import RecordingMocks
        from infra.config.stack_file import read_stack_file
        settings = load_settings(read_stack_file({stack!r}), {stack!r})
        mocks = RecordingMocks({P!r}, {stack!r}, settings.region)
        mocks.install()
        from infra.program import build

        @pulumi.runtime.test
        def run():
            return pulumi.Output.all(**build(settings)).apply(lambda _: None)
        run()
        print(json.dumps({{"types": [r.type for r in mocks.registrations],
                          "calls": [token for token, _ in mocks.calls],
                          "inputs": {{r.type + "/" + r.name: r.inputs for r in mocks.registrations
                                     if r.type in ("pulumi:providers:kubernetes", "pulumi-python:dynamic:Resource")}}}},
                         default=str))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def local_run() -> dict:
    return recorded("local")


def test_local_creates_nothing_in_aws_and_calls_no_aws_api(local_run):
    assert not [t for t in local_run["types"] if t.startswith(("aws:", "eks:", "docker-build:"))]
    assert local_run["calls"] == []


def test_the_recording_sees_aws_invokes_on_eks():
    """The control: the same recording of the eks stack holds the AWS invokes and resources."""
    dev = recorded("dev")
    assert "aws:index/getAvailabilityZones:getAvailabilityZones" in dev["calls"]
    assert "aws:eks/getAddonVersion:getAddonVersion" in dev["calls"]
    assert any(t.startswith("eks:") for t in dev["types"]) and any(t.startswith("aws:") for t in dev["types"])


def test_provider_and_wait_read_the_same_kubeconfig_file_and_context(local_run):
    (provider,) = [v for k, v in local_run["inputs"].items() if k.startswith("pulumi:providers:kubernetes/")]
    # The training wait and the two Jobs' scheduling guards (infra/components/job_scheduling.py).
    waits = [v for k, v in local_run["inputs"].items() if k.startswith("pulumi-python:dynamic:Resource/")]
    assert len(waits) == 3
    home = str(Path.home())
    for wait in waits:
        assert provider["kubeconfig"] == f"{home}/.kube/config" == wait["kubeconfig"]
        assert provider["context"] == "kind-elastic-training" == wait["context"]
    # An existing cluster outlives the stack: unreachable is an error there, not "already gone".
    assert "deleteUnreachable" not in provider


def test_synth_local_counts(synth_stack):
    synth = synth_stack("local")
    types = [r["type"] for r in synth.resources]
    assert not [t for t in types if t.startswith(("aws:", "eks:"))]
    kinds = sorted(m["kind"] for m in synth.manifests)
    # One namespace: the controller runs in the workload namespace with a namespaced Role (issue 33).
    assert kinds == sorted(
        [
            "CustomResourceDefinition",
            "Namespace",
            "Role",
            "RoleBinding",
            "ServiceAccount",
            "Deployment",
            "StatefulSet",
            "Service",
            "NetworkPolicy",
            "NetworkPolicy",
            "NetworkPolicy",
            "PersistentVolumeClaim",
            "PodDisruptionBudget",
            "Job",
            "Job",
            "ElasticJob",
            # the rendezvous store's disruption budget and priority (issue 22); no volume (issue 31)
            "PodDisruptionBudget",
            "PriorityClass",
            # what the controller's account may create, narrowed (issue 36 item 14)
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
    )
    assert len(synth.resources) == 29  # 20 objects, the provider, the wait, 2 Jobs' guards, 5 components
    assert {t.removeprefix("elastic-training:infra:") for t in types if t.startswith("elastic-training:infra:")} == {
        "ExistingCluster",
        "Elastic",
        "ElasticController",
        "SharedVolume",
        "Workloads",
    }
    pvc = next(
        m
        for m in synth.manifests
        if m["kind"] == "PersistentVolumeClaim" and m["spec"]["resources"]["requests"]["storage"] == "5Gi"
    )
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "standard",
        "resources": {"requests": {"storage": "5Gi"}},
    }
    assert synth.outputs["imageRef"] == IMAGE and "topNodes" not in synth.outputs["commands"]


def test_local_stack_is_one_node_two_workers_generated_data():
    settings = load_settings(read_stack_file("local"), "local")
    assert (settings.target, settings.region, settings.image_uri) == (EXISTING, "", IMAGE)
    assert (settings.workers, settings.max_workers, settings.workers_per_node) == (2, 2, 2)
    assert settings.storage_access_mode == READ_WRITE_ONCE and settings.storage_class_name == "standard"
    assert settings.data_source.startswith("synthetic") and settings.epochs == 2 and settings.min_accuracy == 0.3
    raw = (REPO / "stacks" / "Pulumi.local.yaml").read_text()
    assert 'elastic-training:minAccuracy: "0.3"' in raw  # a string key, written as one


def test_local_workers_share_the_node_without_an_instance_type(synth_stack):
    worker = synth_stack("local").manifest("ElasticJob")["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    assert "affinity" not in worker and "nodeSelector" not in worker
    assert worker["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_placement_follows_workers_per_node_and_target():
    dev = load_settings(read_stack_file("dev"), "dev")
    one = specs.worker_placement(dev, "train-x")
    (term,) = one["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"] == {
        "matchLabels": {specs.JOB_LABEL: "train-x"}
    }
    assert one["nodeSelector"] == {"elastic-training/role": "worker"}  # the worker pool's nodes (Karpenter)
    assert specs.worker_placement(replace(dev, workers_per_node=2), "train-x") == {
        "nodeSelector": one["nodeSelector"],
        "tolerations": one["tolerations"],
    }
    existing = replace(dev, target=EXISTING)
    assert specs.worker_placement(existing, "train-x") == {"affinity": one["affinity"]}


@pytest.mark.parametrize(
    "image, policy",
    [
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "0" * 64, "IfNotPresent"),
        ("docker.io/library/trainer:1.2", "IfNotPresent"),
        ("localhost:5000/trainer:dev", "IfNotPresent"),
        ("docker.io/library/trainer:latest", "Always"),
        ("docker.io/library/trainer", "Always"),
        ("localhost:5000/trainer", "Always"),  # the :5000 is the registry's port, not a tag
    ],
)
def test_pull_policy_is_what_kubernetes_defaults_to_for_the_reference(image, policy):
    # kubernetes/kubernetes pkg/apis/core/v1/defaults.go SetDefaults_Container: Always for :latest or
    # no tag, else IfNotPresent (docs: concepts/containers/images, "Image pull policy").
    assert image_pull_policy(image) == policy
    assert pins_the_image(image) == (policy == "IfNotPresent")


def test_existing_needs_no_region_but_eks_does():
    base = {f"{P}:target": "existing", f"{P}:imageUri": IMAGE}
    assert load_settings(base, "t").region == ""
    assert load_settings({**base, "aws:region": "eu-west-1"}, "t").region == "eu-west-1"
    with pytest.raises(ConfigError, match="aws:region"):
        load_settings({f"{P}:target": EKS}, "t")
    with pytest.raises(ConfigError, match="aws:region='us-west-9'"):
        load_settings({**base, "aws:region": "us-west-9"}, "t")  # set anyway: still checked


def test_rwo_needs_every_worker_on_one_node():
    base = {f"{P}:target": "existing", f"{P}:imageUri": IMAGE, f"{P}:storageAccessMode": "ReadWriteOnce"}
    with pytest.raises(ConfigError, match="workersPerNode=1 is invalid: must be >= maxWorkers \\(2\\)"):
        load_settings(base, "t")
    with pytest.raises(ConfigError, match="workersPerNode=2 is invalid: must be >= maxWorkers \\(3\\)"):
        load_settings({**base, f"{P}:workersPerNode": "2", f"{P}:maxWorkers": "3"}, "t")
    assert load_settings({**base, f"{P}:workersPerNode": "2"}, "t").workers_per_node == 2
    # ReadWriteMany may spread one worker per node, on any cluster.
    assert load_settings({f"{P}:target": "existing", f"{P}:imageUri": IMAGE}, "t").workers_per_node == 1


def test_rendered_pull_policy_follows_the_image_reference():
    dev = load_settings(read_stack_file("dev"), "dev")
    built = specs.data_prep_job(dev, "repo@sha256:" + "0" * 64)  # the image the stack builds: by digest
    assert built["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    latest = replace(dev, image_uri="docker.io/library/trainer:latest")
    for obj in (specs.data_prep_job(latest, latest.image_uri), specs.test_job(latest, latest.image_uri)):
        assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    worker = specs.elastic_job(latest, latest.image_uri, "--rdzv_id=x")["spec"]["replicaSpecs"]["Worker"]
    assert worker["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
