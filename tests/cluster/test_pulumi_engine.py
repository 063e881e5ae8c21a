"""Issue 29, test 3: the real Pulumi engine runs the `local` stack against the real control plane.

The CLI (pulumi v3.274.0), the Kubernetes provider (pulumi-resource-kubernetes 4.25.0) and the dynamic
providers' host (pulumi-resource-pulumi-python) are the ones scripts/build-tools.sh builds from the Go
module proxy; the engine starts each plugin itself. The state is the local file backend in a temporary
directory, with a passphrase. The language host is the Python SDK's own (pulumi_engine.py says why and
what that changes); the program is the project's `__main__.py`, and the training wait runs in the
engine's provider host, reading the control plane through the kubeconfig the stack config names.

The stack is `local` (target existing) with its own stack file; only `kubeconfig` and `kubeContext` point
at the control plane. Its node is kind's (scripts/cluster_nodes.py), kwok plays the pods' lifecycles
(scripts/kwok-stages/: Job pods succeed, a pod with the fail label ends with exit code 1), and kind's
`standard` StorageClass and its local-path provisioner are played (played_parts.py). The ElasticJob
controller is ours, `python -m controller` of this checkout, run as a process (controller_harness.
StackController) as the ServiceAccount the stack's `up` creates, under the stack's Role, in the stack's
workload namespace: it stands in for the stack's controller Deployment, whose pod kwok only marks
Running. It runs each ElasticJob as an Indexed Job of the real Job controller.

The failing run: its workers end with exit code 1 (kwok's fail label). The stack has no way to put that
label on its pods, so the test adds it to the run's ElasticJob template while the controller is stopped
(as across a controller restart), before the controller renders its Job. Exit 1 counts against
backoffLimitPerIndex (the stack sets no backoffLimit: controller/render.py's default, 2), so each index is
retried twice; the local stack's workers = minWorkers makes the Job's maxFailedIndexes 0, so the first index
out of retries fails the Job (MaxFailedIndexesExceeded), and the controller marks the ElasticJob Failed with
the Job's reason.

Steps, each a real CLI command: preview; up; preview again (no changes); refresh (no drift); up with a
new runId (a new run: the old run's objects replaced); up with a run whose workers exit 1 (retried, then Failed:
the CLI prints the wait's one-line verdict, no traceback); destroy (nothing of the project left in the API server).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cluster_nodes import stack_nodes, tools_version
from kube import as_list, wait_until
from controller_harness import EXIT_CODE, FAIL, StackController
from played_parts import KIND_STORAGE_CLASS, LocalPathProvisioner
from pulumi_engine import EngineProject
from synth_support import REPO
from infra.specs import workloads as workload_specs
from infra.specs.labels import PART_OF

ENGINE_TOOLS = ("pulumi", "pulumi-kubernetes")
PART_OF_LABEL = "app.kubernetes.io/part-of"
# Stack outputs the program always exports on target existing (infra/program.py build_existing).
OUTPUT_KEYS = {
    "kubeconfig",
    "kubeContext",
    "imageRef",
    "pvcName",
    "namespace",
    "runId",
    "runDirectory",
    "trainingResult",
    "runCost",
    "commands",
}


@pytest.fixture(scope="module")
def engine_bin():
    """The cache's bin directory with the Pulumi CLI, its Python shims and the Kubernetes provider."""
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-tools.sh"), *ENGINE_TOOLS],
        capture_output=True,
        text=True,
        timeout=60 * 60,
    )
    assert result.returncode == 0, f"scripts/build-tools.sh failed:\n{result.stderr[-3000:]}"
    return Path(result.stdout.strip().splitlines()[-1])


def changes(summary: dict[str, int]) -> dict[str, int]:
    """The operations of a change summary other than `same`."""
    return {op: count for op, count in summary.items() if op != "same" and count}


def project_objects(plane, kinds: list[str], namespaces: set[str], since: str) -> list[str]:
    """Every object of these kinds, in every namespace, that is the project's: labelled as part of it, or in
    one of its namespaces; created at `since` (RFC 3339, UTC) or later. Earlier ones are other tests' on the
    shared control plane (the controller tests' namespaces hold the stack's labelled Role and ServiceAccount)."""
    result = plane.kubectl("get", ",".join(kinds), "-A", "-o", "json", check=False)
    assert result.returncode == 0, result.stderr
    found = []
    for obj in json.loads(result.stdout)["items"]:
        meta = obj["metadata"]
        if meta["creationTimestamp"] < since:
            continue
        if (meta.get("labels") or {}).get(PART_OF_LABEL) == PART_OF or meta.get("namespace") in namespaces:
            found.append(f"{obj['kind']} {meta.get('namespace', '')}/{meta['name']}")
    return found


def state_objects(project: EngineProject) -> list[dict[str, Any]]:
    """The Kubernetes objects the stack's state holds (kind, name, namespace), from `pulumi stack export`."""
    deployment = project.stack.export_stack().deployment
    objects = []
    for resource in deployment.get("resources") or []:
        outputs = resource.get("outputs") or {}
        # pendingReplacement: deleted already, its replacement not yet created (a delete-before-replace step
        # that a failed update stopped between the two; pulumi/pulumi sdk/go/common/apitype/core.go ResourceV3, v3.274.0).
        if resource["type"].startswith("kubernetes:") and "kind" in outputs and not resource.get("pendingReplacement"):
            objects.append(
                {
                    "kind": outputs["kind"],
                    "apiVersion": outputs["apiVersion"],
                    "name": outputs["metadata"]["name"],
                    "namespace": outputs["metadata"].get("namespace"),
                }
            )
    return objects


def make_workers_fail(plane, namespace: str, name: str, stopping: threading.Event) -> None:
    """The run's workers end with exit code 1 (scripts/kwok-stages/pod-failed.yaml): the fail label and the
    exit code on its ElasticJob's pod template, which the Job copies onto every worker pod."""
    wait_until(
        f"ElasticJob {namespace}/{name}",
        lambda: (
            stopping.is_set() or plane.kubectl("get", "elasticjob", name, "-n", namespace, check=False).returncode == 0
        ),
        timeout=600,
    )
    template = {"metadata": {"labels": {FAIL: "true"}, "annotations": {EXIT_CODE: "1"}}}
    patch = {"spec": {"replicaSpecs": {"Worker": {"template": template}}}}
    plane.kubectl("patch", "elasticjob", name, "-n", namespace, "--type=merge", "-p", json.dumps(patch))


def test_the_engine_runs_the_local_stack_end_to_end(rendering, control_plane, engine_bin, tmp_path):
    plane, timings = control_plane, {}
    synth = rendering["local"].result()
    nodes = stack_nodes(synth.directory, tools_version("KUBERNETES_VERSION"))
    namespace = next(m for m in synth.manifests if m["kind"] == "ElasticJob")["metadata"]["namespace"]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as nodes_file:
        nodes_file.write(as_list(nodes))
        nodes_file.flush()
        plane.apply_nodes(nodes_file.name)
    plane.kubectl("apply", "-f", "-", input=json.dumps(KIND_STORAGE_CLASS))
    context = plane.kubectl("config", "current-context").stdout.strip()

    started = time.monotonic()
    # The API server runs on this machine's clock; its timestamps have whole seconds.
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    project = EngineProject(tmp_path, engine_bin, "local")
    project.set_config({"elastic-training:kubeconfig": str(plane.kubeconfig), "elastic-training:kubeContext": context})
    first_run = project.stack.get_config("elastic-training:runId").value
    destroyed = False

    def step(name: str, command: str, **options):
        begun = time.monotonic()
        outcome = project.run(command, **options)
        timings[name] = round(time.monotonic() - begun, 1)
        return outcome

    controller = StackController(plane, namespace)
    controller.start_when_granted()
    with LocalPathProvisioner(plane) as provisioner:
        try:
            preview = step("preview", "preview")
            assert preview.ok, preview.output
            assert set(changes(preview.result.change_summary)) == {"create"}, preview.result.change_summary

            up = step("up", "up")
            assert up.ok, up.output
            assert set(up.result.outputs) == OUTPUT_KEYS, sorted(up.result.outputs)
            training = workload_specs.names(first_run).training
            assert up.result.outputs["trainingResult"].value == f"ElasticJob {namespace}/{training} succeeded"
            ran = json.loads(plane.kubectl("get", "elasticjob", training, "-n", namespace, "-o", "json").stdout)[
                "status"
            ]
            assert ran["replicaStatuses"] == {"Worker": {"active": 0, "succeeded": 2, "failed": 0}}, ran
            assert plane.kubectl("get", "job", training, "-n", namespace, check=False).returncode == 0, "no Job of ours"

            again = step("preview again", "preview")
            assert again.ok, again.output
            assert changes(again.result.change_summary) == {}, f"{again.result.change_summary}\n{again.output}"

            refresh = step("refresh", "refresh")
            assert refresh.ok, refresh.output
            drift = changes(refresh.result.summary.resource_changes or {})
            assert drift == {}, f"refresh found drift: {drift}\n{refresh.output}"

            second_run = f"{first_run}-next"
            project.set_config({"elastic-training:runId": second_run})
            rerun = step("up, new runId", "up")
            assert rerun.ok, rerun.output
            second = workload_specs.names(second_run).training
            assert rerun.result.outputs["trainingResult"].value == f"ElasticJob {namespace}/{second} succeeded"
            live = json.loads(plane.kubectl("get", "elasticjobs", "-n", namespace, "-o", "json").stdout)["items"]
            assert [j["metadata"]["name"] for j in live] == [second], "the new run did not replace the old one"

            failing_run = f"{first_run}-fails"
            failing = workload_specs.names(failing_run).training
            controller.stop()
            controller.start_when_granted(
                before_start=lambda: make_workers_fail(plane, namespace, failing, controller.stopping)
            )
            project.set_config({"elastic-training:runId": failing_run})
            failed = step("up, failing run", "up")
            assert not failed.ok, f"up succeeded although every worker exits 1:\n{failed.output}"
            assert "Traceback" not in failed.output, failed.output
            verdict = re.search(rf"ElasticJob {namespace}/{failing} failed: ([^\n]*)", failed.output)
            assert verdict, failed.output
            # The Job's reason (maxFailedIndexes = workers - minWorkers = 0 here, controller/render.py, so the
            # first index out of retries fails the Job), then the last failure: exit 1, counted, so retried.
            assert verdict.group(1).startswith("MaxFailedIndexesExceeded: "), verdict.group(0)
            assert re.search(
                rf"; last failure: worker {failing}-\S+ \(index [01]\) exited 1 "
                rf"\(Error, counted against the retry limit\)",
                verdict.group(0),
            ), verdict.group(0)
            controller.stop()

            created = state_objects(project)
            kinds = sorted(
                {
                    f"{o['kind']}.{o['apiVersion'].split('/')[0]}" if "/" in o["apiVersion"] else o["kind"]
                    for o in created
                }
                | {"Pod"}
            )
            namespaces = {o["name"] for o in created if o["kind"] == "Namespace"}
            listing = [k for k in kinds if not k.startswith("ElasticJob")]  # gone with the CRD (checked below)
            before = project_objects(plane, listing, namespaces, since="")  # all: `up` may adopt the CRD
            missing = [
                f"{o['kind']} {o['namespace'] or ''}/{o['name']}"
                for o in created
                if o["kind"] != "ElasticJob" and f"{o['kind']} {o['namespace'] or ''}/{o['name']}" not in before
            ]
            assert not missing, f"the listing does not see what the state holds, so it proves nothing: {missing}"
            destroy = step("destroy", "destroy")
            destroyed = destroy.ok
            assert destroy.ok, destroy.output
            left = project_objects(plane, listing, namespaces, since)
            assert left == [], f"left in the API server after destroy: {left}"
            crds = plane.kubectl("get", "crd", "-o", "name").stdout.split()
            assert not [c for c in crds if "elastic" in c], crds
        finally:
            timings["total"] = round(time.monotonic() - started, 1)
            print(f"\nengine test timings (s): {timings}")
            controller.stop()
            if not destroyed:
                project.run("destroy")
            plane.kubectl("delete", "storageclass", "standard", "--ignore-not-found", check=False)
    plane.kubectl("delete", "pv", "--all", "--wait=true", "--timeout=60s", check=False)
    plane.kubectl("delete", "nodes", "--all", "--wait=true", "--timeout=60s")
    assert not provisioner.errors and not controller.errors, (provisioner.errors, controller.errors)
    assert controller.exit_codes == [0, 0], (controller.exit_codes, controller.output()[-3000:])
