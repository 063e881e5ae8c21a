"""Every rendered object is valid Kubernetes for its stack's version; ElasticJobs fit our CRD."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from synth_support import STACKS
from infra.config import load_settings
from infra.specs.elastic import elasticjob_crd, elasticjob_schema
from infra.stack_config import read_stack_file
from infra.versions import SUPPORTED_KUBERNETES_VERSIONS


def kubernetes_version(stack: str) -> str:
    return load_settings(read_stack_file(stack), stack).kubernetes_version


@pytest.mark.parametrize("stack", STACKS)
def test_every_manifest_passes_strict_validation(synth_stack, stack):
    version = kubernetes_version(stack)
    checked = 0
    for obj in synth_stack(stack).manifests:
        if obj["kind"] == "ElasticJob":
            continue  # not a built-in kind: validated against our CRD below
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 16


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_manifests_valid_on_every_supported_version(dev, version):
    # The objects do not depend on kubernetesVersion (only the EKS control plane does), so the
    # dev stack's objects stand for every stack on every version it may ask for.
    validated = 0
    for obj in dev.manifests:
        if obj["kind"] != "ElasticJob":
            kubernetes_validate.validate(obj, version, strict=True)  # raises ValidationError when invalid
            validated += 1
    assert validated == len(dev.manifests) - 1


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
    if schema.get("type") == "object" and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
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


def test_crd_is_v1_structural_and_has_no_status_subresource(dev):
    crd = dev.manifest("CustomResourceDefinition")
    assert crd == elasticjob_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "elasticjobs.elastic.pytorch.org"
    assert crd["spec"]["group"] == "elastic.pytorch.org" and crd["spec"]["scope"] == "Namespaced"
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # The controller writes status with a full update; a status subresource would drop it.
    assert "subresources" not in version
    schema = version["schema"]["openAPIV3Schema"]
    assert _structural_problems(schema) == []
    assert schema["properties"]["spec"]["required"] == ["rdzvEndpoint", "replicaSpecs"]
    assert schema["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True
    worker = schema["properties"]["spec"]["properties"]["replicaSpecs"]["properties"]["Worker"]
    assert worker["properties"]["template"]["x-kubernetes-preserve-unknown-fields"] is True
    assert worker["properties"]["restartPolicy"]["enum"] == ["Always", "OnFailure", "Never", "ExitCode"]
