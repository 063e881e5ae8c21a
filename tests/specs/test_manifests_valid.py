"""Every rendered object is valid Kubernetes for its stack's version; ElasticJobs fit our CRD; the
worker pool's NodePool and EC2NodeClass fit Karpenter's CRDs (modelled in tests/karpenter_schema.py)."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from synth_support import STACKS
from tests import karpenter_schema
from infra.config import load_settings
from infra.specs.elastic import elasticjob_crd, elasticjob_schema
from infra.config.stack_file import read_stack_file
from infra.versions import SUPPORTED_KUBERNETES_VERSIONS


# Not built-in kinds: validated against their CRDs below.
CUSTOM_KINDS = ("ElasticJob", "NodePool", "EC2NodeClass")


def kubernetes_version(stack: str) -> str:
    return load_settings(read_stack_file(stack), stack).kubernetes_version


@pytest.mark.parametrize("stack", STACKS)
def test_every_manifest_passes_strict_validation(synth_stack, stack):
    version = kubernetes_version(stack)
    checked = 0
    for obj in synth_stack(stack).manifests:
        if obj["kind"] in CUSTOM_KINDS:
            continue  # not a built-in kind: validated against its CRD below
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 16


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_manifests_valid_on_every_supported_version(dev, version):
    # The objects do not depend on kubernetesVersion (only the EKS control plane does), so the
    # dev stack's objects stand for every stack on every version it may ask for.
    validated = 0
    for obj in dev.manifests:
        if obj["kind"] not in CUSTOM_KINDS:
            kubernetes_validate.validate(obj, version, strict=True)  # raises ValidationError when invalid
            validated += 1
    assert validated == len(dev.manifests) - len(CUSTOM_KINDS)


@pytest.mark.parametrize("stack", STACKS)
def test_the_worker_pool_objects_validate_against_karpenters_crds(synth_stack, stack):
    pool_objects = [m for m in synth_stack(stack).manifests if m["kind"] in ("NodePool", "EC2NodeClass")]
    if load_settings(read_stack_file(stack), stack).target != "eks":
        assert pool_objects == []  # an existing cluster gets no Karpenter objects
        return
    assert sorted(m["kind"] for m in pool_objects) == ["EC2NodeClass", "NodePool"]
    for obj in pool_objects:
        assert karpenter_schema.problems(obj) == [], obj["kind"]


def test_strict_validation_rejects_unknown_fields(dev):
    job = dev.manifest("Job", "prep-")
    job["spec"]["bogusField"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, kubernetes_version("dev"), strict=True)


def _openapi_as_jsonschema(schema: Any) -> Any:
    """Our CRD's openAPIV3Schema as plain JSON Schema: drop the Kubernetes extensions, and make
    objects without `x-kubernetes-preserve-unknown-fields` closed, as the API server prunes them."""
    if isinstance(schema, list):
        return [_openapi_as_jsonschema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {k: _openapi_as_jsonschema(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if (
        schema.get("type") == "object"
        and "properties" in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        converted["additionalProperties"] = False
    return converted


@pytest.mark.parametrize("stack", STACKS)
def test_elasticjobs_validate_against_our_crd(synth_stack, stack):
    validator = jsonschema.Draft7Validator(_openapi_as_jsonschema(elasticjob_schema()))
    (elasticjob,) = [m for m in synth_stack(stack).manifests if m["kind"] == "ElasticJob"]
    assert elasticjob["apiVersion"] == "elastic.pytorch.org/v1alpha1"
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(elasticjob)]
    assert errors == []
    broken = {**elasticjob, "spec": {**elasticjob["spec"], "minReplicas": 0, "rdzvEndpoint": ""}}
    assert len(list(validator.iter_errors(broken))) == 2


def _upstream_sample() -> dict[str, Any]:
    """Shaped like pytorch/elastic kubernetes/config/samples/imagenet.yaml (and classy-vision.yaml)
    @ bc88e6982961d4117e53c4c8163ecf277f35c2c5: no `command` (the image's entrypoint runs), a template
    with apiVersion/kind keys, a GPU limit."""
    return {
        "apiVersion": "elastic.pytorch.org/v1alpha1",
        "kind": "ElasticJob",
        "metadata": {"name": "imagenet", "namespace": "elastic-job"},
        "spec": {
            "rdzvEndpoint": "rendezvous-store:29400",
            "minReplicas": 1,
            "maxReplicas": 2,
            "replicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "ExitCode",
                    "template": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "spec": {
                            "containers": [
                                {
                                    "name": "elasticjob-worker",
                                    "image": "torchelastic/examples:0.2.0",
                                    "imagePullPolicy": "Always",
                                    "args": [
                                        "--nproc_per_node=1",
                                        "/workspace/examples/imagenet/main.py",
                                        "--arch=resnet18",
                                        "--epochs=20",
                                        "--batch-size=32",
                                        "--workers=0",
                                        "/workspace/data/tiny-imagenet-200",
                                    ],
                                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                                }
                            ]
                        },
                    },
                }
            },
        },
    }


def _workshop_sample() -> dict[str, Any]:
    """Shaped like aws-samples/aws-distributed-training-workshop-eks 5-train-model/train.yaml.template
    @ a17c4ab3f2e7ff17d03e10218f187e22bc3ff72b, with its variables filled in (NODE_COUNT=2, CPU_LIMIT=15)."""
    return {
        "apiVersion": "elastic.pytorch.org/v1alpha1",
        "kind": "ElasticJob",
        "metadata": {"name": "cifar10-train"},
        "spec": {
            "rdzvEndpoint": "rendezvous-store:29400",
            "minReplicas": 1,
            "maxReplicas": 128,
            "replicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "ExitCode",
                    "template": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
                        "spec": {
                            "nodeSelector": {"beta.kubernetes.io/instance-type": "c5.4xlarge"},
                            "containers": [
                                {
                                    "name": "elasticjob-worker",
                                    "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/pytorch-cpu:latest",
                                    "imagePullPolicy": "Always",
                                    "command": ["torchrun"],
                                    "args": [
                                        "--nproc_per_node=1",
                                        "/workspace/cifar10-model-train.py",
                                        "--epochs=10",
                                        "--batch-size=128",
                                        "--workers=15",
                                        "--model-file=/efs-shared/cifar10-model.pth",
                                        "/efs-shared/cifar-10-batches-py/",
                                    ],
                                    "env": [{"name": "PROCESSOR", "value": "cpu"}],
                                    "ports": [{"containerPort": 5678}],
                                    "resources": {"limits": {"cpu": 15, "nvidia.com/gpu": 0}},
                                    "volumeMounts": [
                                        {"name": "efs-pv", "mountPath": "/efs-shared"},
                                        {"name": "dshm", "mountPath": "/dev/shm"},
                                    ],
                                }
                            ],
                            "volumes": [
                                {"name": "efs-pv", "persistentVolumeClaim": {"claimName": "efs-pvc"}},
                                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                            ],
                        },
                    },
                }
            },
        },
    }


def _without(obj: dict[str, Any], key: str) -> dict[str, Any]:
    copy = yaml.safe_load(yaml.safe_dump(obj))
    del copy["spec"]["replicaSpecs"]["Worker"][key]
    return copy


def _with_replicas(obj: dict[str, Any], replicas: int) -> dict[str, Any]:
    copy = yaml.safe_load(yaml.safe_dump(obj))
    copy["spec"]["replicaSpecs"]["Worker"]["replicas"] = replicas
    return copy


@pytest.mark.parametrize("sample", [_upstream_sample, _workshop_sample])
def test_upstream_and_workshop_elasticjobs_fit_our_crd(sample):
    validator = jsonschema.Draft7Validator(_openapi_as_jsonschema(elasticjob_schema()))
    assert [e.message for e in validator.iter_errors(sample())] == []


@pytest.mark.parametrize("sample", [_upstream_sample, _workshop_sample])
@pytest.mark.parametrize(
    "broken, problem",
    [
        # controllers/util.go computeDesiredReplicas and job.go UpdateJobStatus dereference Worker.replicas.
        (lambda job: _without(job, "replicas"), "'replicas' is a required property"),
        # job.go UpdateJobStatus: expected = replicas - succeeded == 0 marks the job Succeeded at once.
        (lambda job: _with_replicas(job, 0), "0 is less than the minimum of 1"),
        # kubeflow/common pod.go setRestartPolicy copies an empty policy; the API server defaults it to Always.
        (lambda job: _without(job, "restartPolicy"), "'restartPolicy' is a required property"),
        (lambda job: _without(job, "template"), "'template' is a required property"),
    ],
)
def test_worker_specs_the_controller_cannot_run_are_refused(sample, broken, problem):
    validator = jsonschema.Draft7Validator(_openapi_as_jsonschema(elasticjob_schema()))
    assert [e.message for e in validator.iter_errors(broken(sample()))] == [problem]


def _structural_problems(schema: dict[str, Any], path: str = "") -> list[str]:
    """The structural-schema rules an apiextensions.k8s.io/v1 CRD must follow (a subset that matters here)."""
    problems = []
    if "type" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{path or '/'}: no type")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{path}: properties and additionalProperties together")
    for name, child in (schema.get("properties") or {}).items():
        problems += _structural_problems(child, f"{path}/{name}")
    if isinstance(schema.get("items"), dict):
        problems += _structural_problems(schema["items"], f"{path}[]")
    return problems


def test_crd_is_v1_structural_with_the_status_subresource(dev):
    crd = dev.manifest("CustomResourceDefinition")
    assert crd == elasticjob_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "elasticjobs.elastic.pytorch.org"
    assert crd["spec"]["group"] == "elastic.pytorch.org" and crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # Our controller writes only status, through /status (controller/reconcile.py); the real API
    # server refusing a spec change there is in tests/cluster/test_controller_*.py.
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    assert _structural_problems(schema) == []
    assert schema["properties"]["spec"]["required"] == ["rdzvEndpoint", "replicaSpecs"]
    assert schema["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True
    worker = schema["properties"]["spec"]["properties"]["replicaSpecs"]["properties"]["Worker"]
    assert worker["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True
    assert worker["properties"]["restartPolicy"]["enum"] == ["Always", "OnFailure", "Never", "ExitCode"]
    assert worker["required"] == ["replicas", "restartPolicy", "template"]
    assert worker["properties"]["replicas"]["minimum"] == 1
