"""Item 3 of issue 14: a rebuild from another checkout pushes the same content tag again, and ECR
must accept that push; the workloads stay pinned by digest.

Modelled upstream behaviour, each from its source:
- pulumi-docker-build rebuilds (Create again, pushing every tag) when `context.location` changes:
  pulumi/pulumi-docker-build provider/internal/image.go @ 0b3ab4fe06deb5ac344e26074a445c353272ff2c,
  `Diff`: `if olds.Context.Location != news.Context.Location { diff["context.location"] = update }`;
  `Update` calls `Create`, which builds and pushes.
- ECR refuses a push whose tag already exists when the tag is immutable
  (ImageTagAlreadyExistsException: "The specified image is tagged with a tag that already exists. The
  repository is configured for tag immutability.", botocore ecr service model; ECR user guide
  https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-tag-mutability.html). With
  IMMUTABLE_WITH_EXCLUSION every tag is immutable except those matching an exclusion filter; with
  MUTABLE_WITH_EXCLUSION every tag is mutable except those matching one (API enum docs, CDK
  TagMutability docs, same user guide). A WILDCARD filter's `*` matches any run of characters.
- The filter limits are read from botocore's ecr service model at test time: filterType enum,
  value pattern and length, 1..5 filters; "at most 2 wildcards" is from pulumi-aws 7.51.1
  RepositoryImageTagMutabilityExclusionFilterArgs.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import botocore
import pytest

from infra.components import registry

ECR_MODEL = json.loads(gzip.open(Path(botocore.__file__).parent / "data/ecr/2015-09-21/service-2.json.gz").read())
SHAPES = ECR_MODEL["shapes"]


class TagAlreadyExists(Exception):
    """What ECR answers: ImageTagAlreadyExistsException."""


def check_repository_settings(mutability: str, filters: list[dict]) -> None:
    """Refuse what ECR's CreateRepository would refuse, from its service model."""
    assert mutability in SHAPES["ImageTagMutability"]["enum"], mutability
    if not mutability.endswith("_WITH_EXCLUSION"):
        assert not filters, "exclusion filters apply only to *_WITH_EXCLUSION"
        return
    limits = SHAPES["ImageTagMutabilityExclusionFilters"]
    assert limits["min"] <= len(filters) <= limits["max"], filters
    value = SHAPES["ImageTagMutabilityExclusionFilterValue"]
    for spec in filters:
        assert spec["filterType"] in SHAPES["ImageTagMutabilityExclusionFilterType"]["enum"], spec
        assert re.fullmatch(value["pattern"], spec["filter"]) and value["min"] <= len(spec["filter"]) <= value["max"], (
            spec
        )
        assert spec["filter"].count("*") <= 2, spec


def matches(filter_value: str, tag: str) -> bool:
    return re.fullmatch(".*".join(re.escape(part) for part in filter_value.split("*")), tag) is not None


class EcrRepository:
    """The tag rule of one ECR repository: a push of an existing tag is refused iff the tag is immutable."""

    def __init__(self, mutability: str, filters: list[dict]):
        check_repository_settings(mutability, filters)
        self.mutability, self.filters, self.tags = mutability, filters, {}

    def tag_is_immutable(self, tag: str) -> bool:
        excluded = any(matches(spec["filter"], tag) for spec in self.filters)
        return {
            "MUTABLE": False,
            "IMMUTABLE": True,
            "IMMUTABLE_WITH_EXCLUSION": not excluded,
            "MUTABLE_WITH_EXCLUSION": excluded,
        }[self.mutability]

    def push(self, tag: str, digest: str) -> None:
        if tag in self.tags and self.tag_is_immutable(tag):
            raise TagAlreadyExists(tag)
        self.tags[tag] = digest


def test_the_model_refuses_what_ecr_refuses():
    immutable = EcrRepository("IMMUTABLE", [])
    immutable.push("v1", "sha256:a")
    with pytest.raises(TagAlreadyExists):
        immutable.push("v1", "sha256:b")
    mutable = EcrRepository("MUTABLE", [])
    mutable.push("v1", "sha256:a")
    mutable.push("v1", "sha256:b")
    except_dev = EcrRepository("IMMUTABLE_WITH_EXCLUSION", [{"filter": "dev-*", "filterType": "WILDCARD"}])
    except_dev.push("dev-1", "sha256:a")
    except_dev.push("dev-1", "sha256:b")
    except_dev.push("release-1", "sha256:a")
    with pytest.raises(TagAlreadyExists):
        except_dev.push("release-1", "sha256:b")
    with pytest.raises(AssertionError):
        EcrRepository("IMMUTABLE_WITH_EXCLUSION", [{"filter": "a*b*c*", "filterType": "WILDCARD"}])
    with pytest.raises(AssertionError):
        EcrRepository("IMMUTABLE_WITH_EXCLUSION", [{"filter": "src/*", "filterType": "WILDCARD"}])


def repository_of(synth) -> EcrRepository:
    inputs = synth.one("aws:ecr/repository:Repository")["inputs"]
    return EcrRepository(inputs["imageTagMutability"], inputs.get("imageTagMutabilityExclusionFilters", []))


def test_the_same_content_tag_pushed_twice_is_accepted(dev):
    repository = repository_of(dev)
    (tag_ref,) = dev.one("docker-build:index:Image")["inputs"]["tags"]
    tag = tag_ref.rsplit(":", 1)[1]
    repository.push(tag, "sha256:" + "1" * 64)
    # A rebuild from another checkout: the same sources, the same tag, a new image.
    repository.push(tag, "sha256:" + "2" * 64)
    assert repository.tags[tag] == "sha256:" + "2" * 64


def test_only_the_content_tags_are_mutable(dev):
    repository = repository_of(dev)
    assert repository.mutability == "IMMUTABLE_WITH_EXCLUSION"
    assert repository.tag_is_immutable("v1.0") and repository.tag_is_immutable("latest")
    assert not repository.tag_is_immutable(registry.content_tag())


def test_another_checkout_of_the_same_sources_has_the_same_tag(dev, tmp_path):
    """The tag depends on the sources only (tests/components/test_image_inputs.py: the build context
    is relative too, so another checkout does not rebuild at all)."""
    image = dev.one("docker-build:index:Image")["inputs"]
    other = tmp_path / "another-checkout"
    for entry in registry.IMAGE_INPUTS:
        source = registry.REPO_ROOT / entry
        if source.is_dir():
            shutil.copytree(source, other / entry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            other.mkdir(exist_ok=True)
            shutil.copy2(source, other / entry)
    assert registry.content_tag(other) == registry.content_tag() == image["tags"][0].rsplit(":", 1)[1]


def test_workloads_stay_pinned_by_digest(dev):
    image_ref = dev.outputs["imageRef"]
    assert re.fullmatch(r".+@sha256:[0-9a-f]{64}", image_ref)
    pods = [m["spec"]["template"] for m in dev.manifests if m["kind"] == "Job"]
    pods += [m["spec"]["replicaSpecs"]["Worker"]["template"] for m in dev.manifests if m["kind"] == "ElasticJob"]
    assert len(pods) == 4  # data-prep, test and export Jobs, the workers
    for pod in pods:
        assert [c["image"] for c in pod["spec"]["containers"]] == [image_ref]
