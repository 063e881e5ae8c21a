"""Registry: the ECR repository of the training image, and the image itself, built from images/
and pushed during `pulumi up`.

Workloads get the digest-pinned reference (`repo@sha256:...`), so a change to jobs/ or images/
gives a new digest and replaces the workloads, and nothing else. The pushed tag is a content tag,
`src-<hash of the build inputs>`; `imageUri` skips the build.

The build context and Dockerfile are paths relative to the project root, the same text in every
checkout: pulumi-docker-build rebuilds and pushes whenever `context.location` changes
(pulumi/pulumi-docker-build provider/internal/image.go @ 7bad76a9, `Diff`:
`if olds.Context.Location != news.Context.Location`), and a rebuild is not reproducible (a new
digest re-runs every workload pinned to it). The provider resolves them with filepath.Abs
(context.go) against its working directory, which the engine sets to the project root because
Pulumi.yaml has no `main` (pulumi/pulumi pkg/engine/project.go; tests/provider_host.py). Its
content hash uses paths relative to the context (context.go hashBuildContext), so only a change of
the files themselves, the Dockerfile, the build arguments or the platform rebuilds.

Why the content tags may still be overwritten: a rebuild of the same sources (a `--refresh` that lost
the image, a changed build argument) pushes the same tag again. A fully IMMUTABLE repository refuses
that push (ImageTagAlreadyExistsException, ECR user guide "Image tag mutability"), and `pulumi up`
fails. So the repository is IMMUTABLE_WITH_EXCLUSION with the content tags excluded: a rebuild may
move `src-<hash>` to the rebuilt image, every other tag (a release tag someone pushes by hand) stays
immutable, and nothing runs by tag anyway: the workloads run by digest, so a moved tag changes no
running or future pod.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from infra import versions
from infra.config import Settings, image_variant
from infra.components.naming import aws_tags, component_type

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the image is built from; the tag is a hash of exactly these files.
IMAGE_INPUTS = ("images", "elastic_training", "jobs", "controller", ".dockerignore")
# Relative to the project root (the provider's working directory): identical in every checkout.
BUILD_CONTEXT = "."
DOCKERFILE = "images/Dockerfile"

# The content tags and the ECR exclusion filter that leaves exactly them mutable. ECR filter rules
# (botocore ecr service model, ImageTagMutabilityExclusionFilter(s); pulumi-aws 7.51.1
# RepositoryImageTagMutabilityExclusionFilterArgs): filterType WILDCARD, value ^[0-9a-zA-Z._*-]{1,128}$
# with at most 2 wildcards, 1 to 5 filters per repository.
CONTENT_TAG_PREFIX = "src-"
CONTENT_TAG_FILTER = f"{CONTENT_TAG_PREFIX}*"
# imageContext's image (the user's own): tagged by its folder's content; its Dockerfile gets our image's
# digest-pinned reference as this build argument (`ARG ELASTIC_TRAINING_IMAGE` then `FROM ${ELASTIC_TRAINING_IMAGE}`).
OWN_TAG_PREFIX = "own-"
OWN_IMAGE_BASE_ARG = "ELASTIC_TRAINING_IMAGE"

LIFECYCLE_POLICY = json.dumps(
    {
        "rules": [
            {
                "rulePriority": 1,
                "description": "Expire untagged images after 7 days",
                "selection": {
                    "tagStatus": "untagged",
                    "countType": "sinceImagePushed",
                    "countUnit": "days",
                    "countNumber": 7,
                },
                "action": {"type": "expire"},
            },
            {
                "rulePriority": 2,
                "description": "Keep the 20 most recent images",
                "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 20},
                "action": {"type": "expire"},
            },
        ]
    }
)


def source_digest(root: Path = REPO_ROOT, inputs: tuple[str, ...] = IMAGE_INPUTS) -> str:
    """A short hash of the image's build inputs (paths and contents, caches ignored)."""
    digest = hashlib.sha256()
    for entry in inputs:
        path = root / entry
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.exists() else []
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def content_tag(root: Path = REPO_ROOT, variant: str = "cpu") -> str:
    """The tag the image is pushed under: the same sources and torch variant give the same tag,
    from any path; the CPU and CUDA builds of the same sources get different tags."""
    return f"{CONTENT_TAG_PREFIX}{source_digest(root)}-{variant}"


def own_tag(image_context: str, variant: str, root: Path = REPO_ROOT) -> str:
    """imageContext's tag: its folder's content and our image's (its base), so that a rebuilt base is a
    new tag (the repository's tags outside src-* are immutable)."""
    return f"{OWN_TAG_PREFIX}{source_digest(root, (image_context,))}-{source_digest(root)}-{variant}"


def build_args(variant: str) -> dict[str, str]:
    """images/Dockerfile's build arguments for a torch variant (cpu or cuda, infra/versions.py)."""
    return {"TORCH_INDEX_URL": versions.TORCH_INDEX_URLS[variant]}


@dataclass
class RegistryArgs:
    settings: Settings


class Registry(pulumi.ComponentResource):
    repository_url: pulumi.Output[str]
    image_ref: pulumi.Output[str]

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Registry"), name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)

        repository = aws.ecr.Repository(
            f"{name}-trainer",
            # Immutable tags except the content tags, which a rebuild from another path pushes again
            # (module docstring).
            image_tag_mutability="IMMUTABLE_WITH_EXCLUSION",
            image_tag_mutability_exclusion_filters=[
                aws.ecr.RepositoryImageTagMutabilityExclusionFilterArgs(
                    filter=CONTENT_TAG_FILTER, filter_type="WILDCARD"
                )
            ],
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS")],
            # Without retainData, `pulumi destroy` deletes the repository with its images in it.
            force_delete=not settings.retain_data,
            tags=aws_tags(settings),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=settings.retain_data),
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-trainer-lifecycle", repository=repository.name, policy=LIFECYCLE_POLICY, opts=child
        )
        self.repository_url = repository.repository_url

        if settings.image_uri:
            self.image_ref = pulumi.Output.from_input(settings.image_uri)
        else:
            auth = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id)
            image = docker_build.Image(
                f"{name}-trainer-image",
                context=docker_build.BuildContextArgs(location=BUILD_CONTEXT),
                dockerfile=docker_build.DockerfileArgs(location=DOCKERFILE),
                platforms=[docker_build.Platform(versions.IMAGE_PLATFORM)],
                # The torch build follows the nodes: CUDA on GPU stacks (config.py, imageVariant).
                build_args=build_args(image_variant(settings)),
                tags=[
                    pulumi.Output.concat(repository.repository_url, ":", content_tag(variant=image_variant(settings)))
                ],
                push=True,
                # pulumi-docker-build builds on `pulumi preview` unless told not to (buildOnPreview
                # defaults to true, provider/internal/image.go). PR previews would need Docker and
                # minutes of torch download per stack; tests.yml builds the image once instead.
                build_on_preview=False,
                registries=[
                    docker_build.RegistryArgs(
                        address=repository.repository_url, username=auth.user_name, password=auth.password
                    )
                ],
                opts=child,
            )
            self.image_ref = pulumi.Output.concat(repository.repository_url, "@", image.digest)

        # The workloads' image: the user's own (imageContext, typically FROM ours) or ours. The
        # controller and the rendezvous store always run ours.
        self.workload_image_ref = self.image_ref
        if settings.image_context:
            auth = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id)
            own = docker_build.Image(
                f"{name}-own-image",
                context=docker_build.BuildContextArgs(location=settings.image_context),
                dockerfile=docker_build.DockerfileArgs(location=f"{settings.image_context}/Dockerfile"),
                platforms=[docker_build.Platform(versions.IMAGE_PLATFORM)],
                build_args={OWN_IMAGE_BASE_ARG: self.image_ref},
                tags=[
                    pulumi.Output.concat(
                        repository.repository_url, ":", own_tag(settings.image_context, image_variant(settings))
                    )
                ],
                push=True,
                build_on_preview=False,
                registries=[
                    docker_build.RegistryArgs(
                        address=repository.repository_url, username=auth.user_name, password=auth.password
                    )
                ],
                opts=child,
            )
            self.workload_image_ref = pulumi.Output.concat(repository.repository_url, "@", own.digest)

        self.register_outputs(
            {
                "repositoryUrl": self.repository_url,
                "imageRef": self.image_ref,
                "workloadImageRef": self.workload_image_ref,
            }
        )
