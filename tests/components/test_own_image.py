"""imageContext (issue 38): the stack builds the user's folder with its Dockerfile, FROM the project's image
(passed as the build argument ELASTIC_TRAINING_IMAGE, by digest), and the workloads run it; the controller
and the rendezvous store keep the project's image. Rendered by the real synth under Pulumi's mocks."""

from __future__ import annotations

import pytest

from infra.components import registry

OWN = (
    "imageContext=examples/text_classifier",
    'trainingCommand=["python","-m","examples.text_classifier.train"]',
    'testCommand=["python","-m","examples.text_classifier.evaluate"]',
)


@pytest.fixture(scope="module")
def own(synth_stack):
    return synth_stack("dev", *OWN)


def pod_images(manifest: dict) -> list[str]:
    spec = manifest["spec"]
    template = spec.get("template") or spec["replicaSpecs"]["Worker"]["template"]
    return [container["image"] for container in template["spec"]["containers"]]


def test_the_users_image_is_built_from_its_folder_on_top_of_ours(own):
    images = {image["name"]: image["inputs"] for image in own.resources if image["type"] == "docker-build:index:Image"}
    ours, users = images["registry-trainer-image"], images["registry-own-image"]
    assert users["context"]["location"] == "examples/text_classifier"
    assert users["dockerfile"]["location"] == "examples/text_classifier/Dockerfile"
    assert users["buildArgs"][registry.OWN_IMAGE_BASE_ARG] == own.outputs["imageRef"]
    assert ours["context"]["location"] == registry.BUILD_CONTEXT
    assert users["tags"][0].rsplit(":", 1)[1].startswith(registry.OWN_TAG_PREFIX)


def test_the_workloads_run_the_users_image_and_the_platform_keeps_ours(own):
    ours = own.outputs["imageRef"]
    workloads = [m for m in own.manifests if m["kind"] in ("Job", "ElasticJob")]
    assert len(workloads) >= 3
    for manifest in workloads:
        assert all(image != ours and "@sha256:" in image for image in pod_images(manifest)), manifest["metadata"][
            "name"
        ]
    platform = [m for m in own.manifests if m["kind"] == "Deployment"]
    assert platform and all(pod_images(m) == [ours] for m in platform)


def test_without_image_context_one_image_runs_everything(dev):
    assert [r["name"] for r in dev.resources if r["type"] == "docker-build:index:Image"] == ["registry-trainer-image"]
