"""Issue 29, test 1: every object every stack renders is accepted by a real API server of the stacks'
Kubernetes version, and keeps what was sent.

For each stack, on the tier's control plane (tests/cluster/conftest.py), as a deployment would:
- the CRDs first: ours (rendered) and, for an `eks` stack, Karpenter's at the version we pin
  (infra/versions.py KARPENTER_VERSION). The karpenter chart's crds/ directory links to
  pkg/apis/crds of aws/karpenter-provider-aws at the same tag; that Go module is read through the Go
  module proxy (`go mod download`), so the CRDs are exactly the release's. Each must become Established;
- then every other object, server-side applied in dependency order: structural schemas and pruning,
  CEL rules, defaulting, and every admission plugin EKS enables (Pod Security among them) run;
- every pod a workload will create (from its template, as its controller does) is dry-run created
  in its namespace: Pod Security admission judges pods, not the Deployments or Jobs around them, so
  a worker refused by `enforce` only shows here. The Jobs', Deployments' and StatefulSet's own controllers create
  their pods for real too, and none may report FailedCreate;
- read back, each object holds every field that was sent, unchanged (a field pruned or rewritten by
  the server would be a diff on every `pulumi preview`), and applying it again changes nothing.
Then every object but the CRDs is deleted, so that the next stack's are created, not updated. The CRDs
stay (every stack renders the same ones; tests/cluster/kube.py `delete` says why): the first stack
creates them, and for the others applying them again must change nothing.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from kube import (
    CRD,
    apply,
    delete,
    differences,
    get,
    kind_rank,
    pod_from_template,
    ref,
    wait_established,
    wait_until,
    WORKLOAD_TEMPLATES,
)
from synth_support import STACKS
from infra import versions

KARPENTER_MODULE = "github.com/aws/karpenter-provider-aws"


def karpenter_crds() -> list[dict]:
    """Karpenter's CRDs of the pinned release, from its Go module (the proxy serves its tags)."""
    import yaml

    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{KARPENTER_MODULE}@v{versions.KARPENTER_VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    directory = json.loads(result.stdout)["Dir"]
    from pathlib import Path

    return [yaml.safe_load(path.read_text()) for path in sorted(Path(directory, "pkg/apis/crds").glob("*.yaml"))]


def events_of(plane, namespace: str, reason: str) -> list[str]:
    out = plane.kubectl("get", "events", "-n", namespace, "--field-selector", f"reason={reason}", "-o", "json").stdout
    return [
        f"{e['involvedObject']['kind']} {e['involvedObject']['name']}: {e['message']}" for e in json.loads(out)["items"]
    ]


def _as_applied(obj: dict) -> dict:
    """The object less what its controllers write: status, and the resourceVersion their writes move."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": metadata}


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_object_is_accepted_and_kept(stack, rendered, control_plane):
    plane, manifests = control_plane, rendered[stack].manifests
    uses_karpenter = any(m["apiVersion"].startswith("karpenter.") for m in manifests)
    crds = [m for m in manifests if m["kind"] == CRD] + (karpenter_crds() if uses_karpenter else [])
    objects = sorted((m for m in manifests if m["kind"] != CRD), key=kind_rank)
    created = []
    try:
        created += crds
        apply(plane, crds)
        wait_established(plane, [c["metadata"]["name"] for c in crds])
        created += objects
        apply(plane, objects)

        # The pods each workload will create: Pod Security and pod validation judge them.
        refused = []
        for workload in (o for o in objects if o["kind"] in WORKLOAD_TEMPLATES):
            pod = pod_from_template(workload, f"{workload['metadata']['name']}-probe")
            result = plane.kubectl(
                "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod), check=False
            )
            if result.returncode != 0:
                refused.append(f"{ref(workload)}: {result.stderr.strip()}")
        assert not refused, "pods the stack's workloads would create are refused:\n" + "\n".join(refused)

        # The PV controller binds a claim pre-bound by volumeName (pkg/controller/volume/persistentvolume
        # pv_controller.go syncUnboundClaim) and so writes it once after the create; let that settle,
        # or the read-back below races it and the re-apply sees a resourceVersion the controller moved.
        prebound = [o for o in objects if o["kind"] == "PersistentVolumeClaim" and o["spec"].get("volumeName")]
        wait_until(
            f"the pre-bound claims {[ref(o) for o in prebound]} Bound",
            lambda: all((c.get("status") or {}).get("phase") == "Bound" for c in get(plane, prebound)),
            timeout=60,
        )

        # Read back: every field sent is kept as sent.
        live = get(plane, objects + crds)
        diffs = [f"{ref(sent)} {d}" for sent, kept in zip(objects + crds, live) for d in differences(sent, kept)]
        assert not diffs, "the API server did not keep what was sent:\n" + "\n".join(diffs)

        # Applying the same objects again changes nothing (what `pulumi preview` after `up` would diff).
        # Compared without status and resourceVersion: a controller writes those meanwhile (the Job
        # controller sets a new Job's status), which is no change of ours.
        again = apply(plane, objects + crds, "--dry-run=server")
        changed = [ref(before) for before, after in zip(live, again) if _as_applied(after) != _as_applied(before)]
        assert not changed, f"applying the same objects again would change: {changed}"

        # The real Job, ReplicaSet and StatefulSet controllers create the pods (no node is needed for that).
        controlled = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "Job")]

        def pods_created() -> bool:
            status = [o.get("status") or {} for o in get(plane, controlled)]
            return all(
                s.get("replicas", 0) >= (o["spec"].get("replicas", 1))
                if o["kind"] in ("Deployment", "StatefulSet")
                else s.get("active", 0) + s.get("succeeded", 0) >= 1
                for o, s in zip(controlled, status)
            )

        wait_until(f"the pods of {[ref(o) for o in controlled]}", pods_created, timeout=60)
        for namespace in sorted({o["metadata"]["namespace"] for o in controlled}):
            assert not events_of(plane, namespace, "FailedCreate")
    finally:
        delete(plane, created)
