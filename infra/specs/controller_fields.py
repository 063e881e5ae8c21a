"""The ElasticJob written the way the TorchElastic controller stores it, so that a refresh of an
untouched run finds exactly what the stack wrote.

The controller decodes every ElasticJob into its Go types and writes the whole object back on each
status update, finished jobs included (pytorch/elastic @ bc88e69, kubernetes/controllers/job.go
UpdateJobStatusInApiServer `r.Update`; kubeflow/common @ 0b3a4c3 job.go ReconcileJobs). What the
stored object loses or respells that way, `pulumi refresh` records, and the next `up` would write
back (pulumi-kubernetes refresh prunes the live object to the inputs' shape and diffs it); with a
changed spec replacing the ElasticJob (infra/components/workloads.py) that would re-run training.
So the template carries neither of these:
- `seccompProfile` (pod and container securityContext): added in Kubernetes 1.19, absent from the
  k8s.io/api v0.15.10 types of the controller's go.mod, so it never reached the worker pods anyway.
  The pods still run under RuntimeDefault: the nodes' kubelet has seccompDefault on
  (infra/specs/node_config.py), and the workload namespace enforces "baseline"
  (infra/specs/elastic.py WORKLOAD_NAMESPACE_ENFORCE);
- a quantity in another spelling than Kubernetes' canonical one ("0.5" is stored as "500m", "8192Mi"
  as "8Gi": infra/specs/quantity.py).
tests/elasticjob_writeback.py models the write-back from the 1.15 field tree and checks every stack.
"""

from __future__ import annotations

from typing import Any

from infra.specs.quantity import canonical

NEWER_THAN_THE_CONTROLLER = "seccompProfile"


def _canonical_quantities(pod_spec: dict[str, Any]) -> None:
    for container in pod_spec.get("containers", []):
        for bound in ("requests", "limits"):
            values = (container.get("resources") or {}).get(bound) or {}
            for name, quantity in values.items():
                values[name] = canonical(quantity)
    for volume in pod_spec.get("volumes", []):
        if "sizeLimit" in (volume.get("emptyDir") or {}):
            volume["emptyDir"]["sizeLimit"] = canonical(volume["emptyDir"]["sizeLimit"])


def as_the_controller_keeps_it(elasticjob: dict[str, Any]) -> dict[str, Any]:
    """`elasticjob`, changed in place (it may hold Outputs, which are not copied), its worker
    templates holding only what survives the controller's write-back."""
    for replica in elasticjob["spec"]["replicaSpecs"].values():
        pod_spec = replica["template"]["spec"]
        for holder in (pod_spec, *pod_spec.get("containers", [])):
            (holder.get("securityContext") or {}).pop(NEWER_THAN_THE_CONTROLLER, None)
        _canonical_quantities(pod_spec)
    return elasticjob
