"""What an image reference pins, and the pull policy Kubernetes would choose for it."""

from __future__ import annotations


def pins_the_image(image: str) -> bool:
    """Whether a reference names a digest or a tag other than latest (the last path part's `:tag`;
    a `:port` belongs to the registry, before the first `/`)."""
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    return ":" in last and last.rsplit(":", 1)[1] != "latest"


def image_pull_policy(image: str) -> str:
    """The pull policy Kubernetes itself would choose for this reference, written out: IfNotPresent
    for a digest or a tag other than latest, Always for :latest or no tag (Kubernetes docs,
    concepts/containers/images "Image pull policy": "if you omit the imagePullPolicy field, and you
    specify the digest ..., or the tag ... is not :latest, IfNotPresent"). An image loaded into kind
    needs IfNotPresent or Never (kind quick start, "Loading an Image Into Your Cluster")."""
    return "IfNotPresent" if pins_the_image(image) else "Always"
