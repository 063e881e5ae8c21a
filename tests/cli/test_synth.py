"""`elastic-training synth`: what it writes, for every stack, and how the whole program is wired."""

from __future__ import annotations

import importlib
import inspect

import pytest
import yaml

from infra.config import load_settings
from infra.config.stack_file import read_stack_file
from synth_support import STACKS, run_synth

COMPONENT_PREFIX = "elastic-training:infra:"


def test_every_stack_synthesizes(synth_stack):
    assert STACKS, "stacks/ holds no Pulumi.<stack>.yaml"
    for stack in STACKS:
        synth = synth_stack(stack)
        assert {p.name for p in synth.directory.iterdir()} == {
            "manifests",
            "resources.json",
            "graph.mmd",
            "outputs.json",
            "cost.json",
            ".synth",
        }
        assert len(synth.manifests) >= 17
        if load_settings(read_stack_file(stack), stack).target == "existing":
            # No AWS platform: the provider, four components, the wait and the in-cluster objects
            # (tests/test_existing_target.py counts them).
            assert len(synth.resources) >= 25
        else:
            assert len(synth.resources) >= 60


def test_manifest_files_hold_one_object_in_wire_form(dev):
    for path in sorted((dev.directory / "manifests").glob("*.yaml")):
        documents = list(yaml.safe_load_all(path.read_text()))
        assert len(documents) == 1, path.name
        obj = documents[0]
        assert list(obj)[:3] == ["apiVersion", "kind", "metadata"], path.name
        text = path.read_text()
        # camelCase wire form, never the SDK's snake_case
        assert "api_version" not in text and "restart_policy" not in text and "volume_mounts" not in text


def test_components_in_the_graph_and_every_child_parented(dev):
    components = {r["urn"]: r for r in dev.resources if r["type"].startswith(COMPONENT_PREFIX)}
    assert {r["type"].removeprefix(COMPONENT_PREFIX) for r in components.values()} == {
        "Network",
        "Cluster",
        "WorkerCapacity",
        "Storage",
        "Registry",
        "Addons",
        "Elastic",
        "ElasticController",
        "Workloads",
        "Artifacts",
    }
    for resource in dev.resources:
        if resource["urn"] in components:
            assert resource["parent"].endswith("pulumi:pulumi:Stack::elastic-training-dev")
        else:
            assert resource["parent"] in components, f"{resource['name']} is not parented to a component"
            component_name = components[resource["parent"]]["name"]
            assert resource["name"].startswith(f"{component_name}-"), resource["name"]
    graph = (dev.directory / "graph.mmd").read_text()
    assert graph.startswith("flowchart LR")
    assert graph.count("subgraph ") == 10 and "-->" in graph


def test_kubernetes_objects_use_the_cluster_provider(dev):
    provider = dev.one("pulumi:providers:kubernetes")
    assert "deleteUnreachable" not in provider["inputs"]  # tests/components/test_unreachable_cluster.py
    assert provider["dependsOn"] == [dev.one("eks:index:Cluster")["urn"]]
    objects = [r for r in dev.resources if r["type"].startswith("kubernetes:") and r["type"] != provider["type"]]
    # every in-cluster object (26 in dev: platform, the controller's account, Role, binding, admission policy and its
    # binding, and Deployment in the workload namespace, the rendezvous store's Service, Deployment, priority class and budget, policies,
    # the run's PDB, workloads, the export's service account, the worker NodePool and EC2NodeClass) is a manifest;
    # Karpenter's two Helm releases (its CRDs, its controller) are not (their inputs are in resources.json)
    releases = [r for r in objects if r["type"] == "kubernetes:helm.sh/v3:Release"]
    assert sorted(r["name"] for r in releases) == ["capacity-karpenter", "capacity-karpenter-crd"]
    assert len(objects) - len(releases) == len(dev.manifests) == 26
    assert {r["providerUrn"] for r in objects} == {provider["urn"]}


def _taggable(type_token: str) -> bool:
    """Whether the pulumi-aws resource class behind a type token takes `tags`."""
    _, module_path, class_name = type_token.split(":")
    module = importlib.import_module(f"pulumi_aws.{module_path.split('/')[0]}")
    return "tags" in inspect.signature(getattr(module, class_name)._internal_init).parameters


def test_every_aws_resource_is_tagged(dev):
    aws_resources = [r for r in dev.resources if r["type"].startswith("aws:")]
    taggable = [r for r in aws_resources if _taggable(r["type"])]
    assert len(taggable) >= 20
    for resource in taggable:
        tags = resource["inputs"].get("tags") or {}
        assert (
            tags.get("project") == "elastic-training"
            and tags.get("stack") == "dev"
            and tags.get("managed-by") == "pulumi"
        ), f"{resource['type']} {resource['name']} tags: {tags}"
    for remote in ("eks:index:Cluster", "eks:index:ManagedNodeGroup"):
        assert dev.one(remote)["inputs"]["tags"]["stack"] == "dev"


def test_outputs_name_what_a_user_needs(dev):
    outputs = dev.outputs
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["imageRef"].startswith(outputs["repositoryUrl"] + "@sha256:")
    assert outputs["efsFileSystemId"].startswith("fs-")
    assert outputs["pvcName"] == "efs-pvc" and outputs["runId"] == "run-1" and outputs["namespace"] == "training"
    commands = outputs["commands"]
    assert commands["workerLogs"].startswith("kubectl logs -f -n training -l elastic-training/job=train-run-1")
    assert commands["topNodes"] == "kubectl top nodes"
    assert commands["kubeconfig"] == f"aws eks update-kubeconfig --region us-west-2 --name {outputs['clusterName']}"


def test_overrides_have_pulumi_config_set_meaning(variant):
    synth = variant
    pool = synth.manifest("NodePool")
    assert pool["spec"]["limits"]["cpu"] == str(3 * 16)  # nodeMaxCount=3 nodes of the c5.4xlarge shape
    assert synth.outputs["commands"]["kubeconfig"].startswith("aws eks update-kubeconfig --region eu-west-1 ")
    assert synth.manifest("ElasticJob")["spec"]["replicaSpecs"]["Worker"]["replicas"] == 3


def test_missing_stack_is_one_line(tmp_path):
    result = run_synth(tmp_path / "out", "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: no stack file stacks/Pulumi.nope.yaml") and "dev" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("override", ["nodeMaxCount", "=3"])
def test_malformed_override_is_one_line(tmp_path, override):
    result = run_synth(tmp_path / "out", "dev", override)
    assert result.returncode == 2 and "must be KEY=VALUE" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_out_is_replaced_only_when_synth_wrote_it(tmp_path):
    """synth never deletes what it did not write: a folder holding other things, or a file, is
    refused with one line and left exactly as it was; its own previous output is replaced."""
    kept = tmp_path / "notes"
    kept.mkdir()
    (kept / "thesis.tex").write_text("years of work")
    result = run_synth(kept, "dev")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "not written by synth" in result.stderr
    assert [p.name for p in kept.iterdir()] == ["thesis.tex"]

    a_file = tmp_path / "out.txt"
    a_file.write_text("keep me")
    result = run_synth(a_file, "dev")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "is not a directory" in result.stderr and a_file.read_text() == "keep me"

    under_a_file = a_file / "out"
    result = run_synth(under_a_file, "dev")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert a_file.read_text() == "keep me"

    out = tmp_path / "synth"
    out.mkdir()  # an empty directory is fine
    assert run_synth(out, "dev").returncode == 0 and (out / ".synth").is_file()
    (out / "stale.yaml").write_text("from an older synth")
    assert run_synth(out, "dev").returncode == 0  # its own output: replaced whole
    assert not (out / "stale.yaml").exists() and (out / "resources.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "out.txt", "synth"]  # no staging left


def test_synth_leaves_no_event_loop_open_under_resource_warnings_as_errors(tmp_path):
    """Pulumi's mocks made event loops (the program's, one per executor thread) and closed none: each was an
    "unclosed event loop" ResourceWarning at exit (issue 39). run_program now runs them on loops it closes,
    and gives the caller back its own event loop policy."""
    import asyncio
    import os
    import subprocess
    import sys

    from synth_support import REPO

    env = {**os.environ, "PYTHONWARNINGS": "error::ResourceWarning", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "infra.cli", "synth", "smoke", "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "ResourceWarning" not in result.stderr and "unclosed" not in result.stderr, result.stderr

    from infra.cli.synth import run_program

    policy = asyncio.get_event_loop_policy()
    run_program(load_settings(read_stack_file("smoke"), "smoke"))
    assert asyncio.get_event_loop_policy() is policy
