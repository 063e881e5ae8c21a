"""What becomes of an ElasticJob once the TorchElastic controller has written it back, and what a
`pulumi refresh` then records: a model built from the sources, for the refresh tests.

The controller (pytorch/elastic @ bc88e6982961d4117e53c4c8163ecf277f35c2c5, kubernetes/):
- reads every ElasticJob into its Go types and writes the whole object back with `r.Update` on
  every status change, finished jobs included (controllers/job.go UpdateJobStatusInApiServer;
  kubeflow/common @ 0b3a4c3 pkg/controller.v1/common/job.go ReconcileJobs calls it whenever the
  status it computed differs);
- its types (api/v1alpha1/elasticjob_types.go ElasticJobSpec): `RunPolicy common.RunPolicy
  json:",inline"`, `replicaSpecs`, `rdzvEndpoint`, `minReplicas`/`maxReplicas` (omitempty
  pointers). The RunPolicy field is named, not embedded: Go's encoding/json and json-iterator
  (reflect_extension.go describeStruct @ fff342fd, which apimachinery's serializer uses) inline
  only anonymous fields, so it is read from and written to the key "RunPolicy". A spec-level
  `cleanPodPolicy` (or ttlSecondsAfterFinished, backoffLimit, ...) never reaches the controller
  and is not written back; the "RunPolicy" object it writes instead is pruned by the API server,
  our CRD's spec being structural without x-kubernetes-preserve-unknown-fields
  (infra/manifests/elasticjob-crd.yaml);
- a replica spec is kubeflow/common pkg/apis/common/v1 ReplicaSpec: replicas, template,
  restartPolicy; the template is a k8s.io/api v0.15.10 PodTemplateSpec (go.mod), so fields newer
  than Kubernetes 1.15 are dropped (tests/controller_model.py, the 1.15 field tree);
- quantities (core/v1 ResourceList values, EmptyDirVolumeSource.sizeLimit) are resource.Quantity:
  written back in their canonical spelling (kubernetes/apimachinery v0.15.11-beta.0 @ 0cd702f8,
  pkg/api/resource/quantity.go MarshalJSON -> CanonicalizeBytes), modelled here on its own (below)
  rather than with infra/specs/quantity.py, so that the two are checked against each other.

pulumi-kubernetes (provider @ 94977969d64112b04e19945818a7d5d5f38f631d) on `refresh`: Read prunes the
live object to the shape of the last inputs (provider/pkg/provider/provider.go Read,
`pruneLiveState`; util.go pruneMap/pruneSlice: keep a live key only where the inputs have it,
recurse into maps, walk lists by position up to the inputs' length) and returns that as the new
inputs; the next `up` diffs the program's inputs against them.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from controller_model import keep_known_fields, pod_template_fields_1_15

# ElasticJobSpec's JSON keys (RunPolicy's fields are not among them: see above).
SPEC_KEYS = ("replicaSpecs", "rdzvEndpoint", "minReplicas", "maxReplicas")
REPLICA_SPEC_KEYS = ("replicas", "template", "restartPolicy")
DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
BINARY_SUFFIXES = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def go_quantity(text: str) -> str:
    """How resource.Quantity writes back `text` (the value read with the Kubernetes client's own
    parse_quantity). Binary suffix: the largest power of 1024 that divides the value, unless the
    value is below 1024 or fractional, which are written as decimal. Decimal: among the SI
    exponents (multiples of 3), the largest whose mantissa is whole."""
    value = Decimal(parse_quantity(text))
    if value == 0:
        return "0"
    if text.endswith("i") and abs(value) >= 1024 and value == int(value):
        for power in range(6, -1, -1):
            if value % (1024**power) == 0:
                return f"{int(value) // 1024**power}{BINARY_SUFFIXES[power]}"
    for exponent in sorted(DECIMAL_SUFFIXES, reverse=True):
        mantissa = value.scaleb(-exponent)
        if mantissa == mantissa.to_integral_value():
            return f"{int(mantissa)}{DECIMAL_SUFFIXES[exponent]}"
    raise AssertionError(f"{text}: finer than nano, which the stack never writes")


def _quantities(pod_spec: dict[str, Any]) -> None:
    for container in pod_spec.get("containers", []) + pod_spec.get("initContainers", []):
        for bound in ("requests", "limits"):
            values = (container.get("resources") or {}).get(bound)
            if values:
                container["resources"][bound] = {name: go_quantity(str(q)) for name, q in values.items()}
    for volume in pod_spec.get("volumes", []):
        empty_dir = volume.get("emptyDir")
        if empty_dir and "sizeLimit" in empty_dir:
            empty_dir["sizeLimit"] = go_quantity(str(empty_dir["sizeLimit"]))


def written_back(elasticjob: dict[str, Any]) -> dict[str, Any]:
    """The stored ElasticJob after the controller's first status update (metadata as it was:
    ObjectMeta round-trips whole; the server-side fields it gains are pruned by refresh)."""
    spec = elasticjob["spec"]
    stored_spec: dict[str, Any] = {key: copy.deepcopy(spec[key]) for key in SPEC_KEYS if key in spec}
    for name, replica in spec["replicaSpecs"].items():
        kept = {key: copy.deepcopy(replica[key]) for key in REPLICA_SPEC_KEYS if key in replica}
        kept["template"] = keep_known_fields(replica["template"], pod_template_fields_1_15())
        _quantities(kept["template"]["spec"])
        stored_spec["replicaSpecs"][name] = kept
    return {**copy.deepcopy({k: v for k, v in elasticjob.items() if k != "spec"}), "spec": stored_spec}


def prune(live: Any, inputs: Any) -> Any:
    """pulumi-kubernetes pruneMap/pruneSlice: `live` cut to the shape of `inputs`."""
    if isinstance(live, dict) and isinstance(inputs, dict):
        return {key: prune(value, inputs[key]) for key, value in live.items() if key in inputs}
    if isinstance(live, list) and isinstance(inputs, list):
        if not live or not inputs or type(live[0]) is not type(inputs[0]):
            return copy.deepcopy(live) if live and inputs else []
        return [prune(value, target) for value, target in zip(live, inputs)]
    return copy.deepcopy(live)


def refreshed_inputs(elasticjob: dict[str, Any]) -> dict[str, Any]:
    """What `pulumi refresh` records as the ElasticJob's inputs once the controller has written it back."""
    return prune(written_back(elasticjob), elasticjob)


def refresh_changes(elasticjob: dict[str, Any], path: str = "") -> list[str]:
    """The paths where the next `up` would see a change after a refresh of an untouched run."""
    return _diff(elasticjob, refreshed_inputs(elasticjob), path)


def _diff(want: Any, have: Any, path: str) -> list[str]:
    if isinstance(want, dict) and isinstance(have, dict):
        return [p for key in sorted(set(want) | set(have)) for p in _diff(want.get(key), have.get(key), f"{path}.{key}")]
    if isinstance(want, list) and isinstance(have, list) and len(want) == len(have):
        return [p for index, (a, b) in enumerate(zip(want, have)) for p in _diff(a, b, f"{path}[{index}]")]
    return [] if want == have else [path or "."]
