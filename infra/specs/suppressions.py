"""checkov checks that cannot apply to one object, each with the reason, as checkov annotations.

Suppressions are per object (kind + app.kubernetes.io/component label), never global; the
security page (docs/security.md, "Scanner suppressions") lists this table, as `markdown_table()` renders it. The tests
fail on a suppression that no longer matches a failing check, so the table cannot go stale.
"""

from __future__ import annotations

from typing import Any

from infra import versions

CONTROLLER = ("Deployment", "elastic-controller")
STORE = ("StatefulSet", "rendezvous")
DEVICE_PLUGIN = ("DaemonSet", "gpu-device-plugin")
# What each key means, for the docs table.
OBJECT_NAMES = {
    CONTROLLER: "our ElasticJob controller (workload namespace)",
    DEVICE_PLUGIN: "the NVIDIA device plugin (kube-system, GPU stacks only)",
}


def _third_party_image(image: str) -> str:
    return (
        f"third-party image {image} that we do not build, pinned by release tag in infra/versions.py; "
        "no digest could be verified offline, so none is pinned: add image@sha256:DIGEST there "
        "(or mirror the image to ECR) and drop this line"
    )


# Our own workloads normally run the image the stack built, by digest. An `imageUri` pinned by a tag
# instead (an image loaded into kind has no registry digest) fails two checks, for a reason:
# (checkov scans the Jobs, the Deployment and the StatefulSet; it has no checks for the ElasticJob, a custom
# resource.) Our objects that run the training image (the controller's Deployment: python -m controller; the
# rendezvous store's StatefulSet: python -m jobs.elastic.store_server).
IMAGE_COMPONENTS = {("Job", "data-prep"), ("Job", "evaluation"), CONTROLLER, STORE}
TAG_PINNED_IMAGE: list[tuple[str, str]] = [
    (
        "CKV_K8S_43",
        "imageUri names a tag, not a digest: an image built and loaded into the cluster (kind load "
        "docker-image) has no registry digest; stacks that push to a registry should pin by digest",
    ),
    (
        "CKV_K8S_15",
        "an image loaded into the node (kind load docker-image) exists only there: Always would pull "
        "it from a registry that does not have it (kind quick start, Loading an Image Into Your Cluster)",
    ),
]
TAG_PINNED_OBJECTS = (
    "our Jobs (data-prep, evaluation), the ElasticJob controller and the rendezvous store when `imageUri` names a tag"
)

# (kind, component) -> [(check id, reason)]
SUPPRESSIONS: dict[tuple[str, str], list[tuple[str, str]]] = {
    CONTROLLER: [
        (
            "CKV_K8S_8",
            "the controller serves nothing, so it has no health endpoint; a leader that cannot renew "
            "its Lease exits (controller/__main__.py) and the Deployment restarts it",
        ),
        (
            "CKV_K8S_9",
            "nothing routes traffic to the controller (no Service, no webhook), so readiness would gate nothing",
        ),
        (
            "CKV_K8S_38",
            "the controller watches ElasticJobs, Jobs and pods and creates Jobs through the Kubernetes API, "
            "so it needs its service account token; its namespaced Role limits what the token can do",
        ),
    ],
    DEVICE_PLUGIN: [
        ("CKV_K8S_43", _third_party_image(versions.NVIDIA_DEVICE_PLUGIN_IMAGE)),
        (
            "CKV_K8S_15",
            "public image: there is no pull credential that IfNotPresent could let another pod skip, "
            "and Always would make every GPU node's plugin restart depend on nvcr.io being reachable",
        ),
        (
            "CKV_K8S_23",
            "the plugin creates its gRPC socket in the kubelet's device-plugin directory "
            "(/var/lib/kubelet/device-plugins, root-owned on the node), so it runs as root, as upstream's "
            "DaemonSet does; capabilities dropped, no privilege escalation, read-only root filesystem",
        ),
        ("CKV_K8S_40", "runs as root for the same reason (uid 0 owns the kubelet's device-plugin directory)"),
        (
            "CKV_K8S_8",
            "the plugin serves no health endpoint (upstream's DaemonSet has no probes); when the kubelet "
            "restarts it re-registers by watching kubelet.sock, and a crash ends the process, which the "
            "DaemonSet restarts",
        ),
        (
            "CKV_K8S_9",
            "nothing routes traffic to the plugin (the kubelet talks to it over a unix socket), so "
            "readiness would gate nothing",
        ),
    ],
}


def _images(obj: dict[str, Any]) -> list[Any]:
    spec = obj.get("spec") or {}
    template = spec.get("template") or ((spec.get("replicaSpecs") or {}).get("Worker") or {}).get("template") or {}
    return [c.get("image") for c in (template.get("spec") or {}).get("containers") or []]


def pinned_by_tag(image: Any) -> bool:
    """A plain reference without a digest; the image the stack builds is an Output of repo@digest."""
    return isinstance(image, str) and "@sha256:" not in image


def suppressions_for(obj: dict[str, Any]) -> list[tuple[str, str]]:
    component = obj.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component", "")
    found = list(SUPPRESSIONS.get((obj["kind"], component), []))
    if (obj["kind"], component) in IMAGE_COMPONENTS and any(pinned_by_tag(image) for image in _images(obj)):
        found += TAG_PINNED_IMAGE
    return found


def annotate(obj: dict[str, Any], image_by_tag: bool = False) -> dict[str, Any]:
    """Add `checkov.io/skipN: CHECK=reason` annotations for this object's suppressions.
    `image_by_tag`: the object runs `imageUri` pinned by a tag (its image may still be an Output here)."""
    entries = suppressions_for(obj)
    if image_by_tag and not any(entry in entries for entry in TAG_PINNED_IMAGE):
        entries += TAG_PINNED_IMAGE
    if entries:
        annotations = obj["metadata"].setdefault("annotations", {})
        for index, (check, reason) in enumerate(entries, start=1):
            annotations[f"checkov.io/skip{index}"] = f"{check}={reason}"
    return obj


def markdown_rows() -> list[str]:
    """One Markdown table row per suppression: check, object, reason."""
    return [
        *(
            f"| {check} | {kind} `app.kubernetes.io/component: {component}`: {OBJECT_NAMES[(kind, component)]} | {reason} |"
            for (kind, component), entries in SUPPRESSIONS.items()
            for check, reason in entries
        ),
        *(f"| {check} | {TAG_PINNED_OBJECTS} | {reason} |" for check, reason in TAG_PINNED_IMAGE),
    ]


def markdown_table() -> str:
    """The table docs/security.md carries (scripts/docs.py writes it there; a test compares)."""
    return "\n".join(["| Check | Object | Reason |", "|---|---|---|", *markdown_rows()]) + "\n"
