"""The pipeline as stack resources: specs (golden files), order, waits, image pinning, run ids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from worker_pods import command_line, worker_pod
from infra.components.spec_identity import SPEC_HASH_ANNOTATION, spec_hash_of
from infra.config import load_settings
from infra.specs import workloads as specs
from infra.config.stack_file import read_stack_file

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "0" * 64
WORKLOAD_TYPES = {
    "kubernetes:batch/v1:Job",
    "kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob",
    "kubernetes:policy/v1:PodDisruptionBudget",
    "pulumi-python:dynamic:Resource",
    # the export role's policy: it may write runs/<runId>/* of the artifacts bucket only
    "aws:iam/rolePolicy:RolePolicy",
}


def rendered_specs(stack: str) -> dict[str, dict]:
    settings = load_settings(read_stack_file(stack), stack)
    rdzv_arg = f"--rdzv_id={specs.rendezvous_id(settings, IMAGE)}"
    return {
        "data-prep": specs.data_prep_job(settings, IMAGE),
        "training": specs.elastic_job(settings, IMAGE, rdzv_arg),
        "training-pdb": specs.worker_disruption_budget(settings),
        "test": specs.test_job(settings, IMAGE),
    }


@pytest.mark.parametrize("stack", ["dev", "smoke"])
def test_specs_match_golden_files(stack):
    """Set UPDATE_GOLDEN=1 to rewrite them; the diff then shows in review."""
    for role, obj in rendered_specs(stack).items():
        path = GOLDEN / f"{stack}-{role}.yaml"
        text = yaml.safe_dump(obj, sort_keys=True)
        if os.environ.get("UPDATE_GOLDEN") == "1":
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
        assert yaml.safe_load(path.read_text()) == obj, f"{path.name} differs from the rendered spec"


def test_synth_renders_the_specs(dev):
    """What synth writes is the spec builders' output with the built image's digest."""
    image = dev.outputs["imageRef"]
    settings = load_settings(read_stack_file("dev"), "dev")
    rdzv_arg = f"--rdzv_id={specs.rendezvous_id(settings, image)}"
    assert dev.manifest("Job", "prep-run-1") == yaml.safe_load(yaml.safe_dump(specs.data_prep_job(settings, image)))
    training = yaml.safe_load(yaml.safe_dump(specs.elastic_job(settings, image, rdzv_arg)))
    # plus the hash of its spec, which the workloads component adds (infra/components/spec_identity.py)
    training["metadata"]["annotations"][SPEC_HASH_ANNOTATION] = spec_hash_of(training["spec"])
    assert dev.manifest("ElasticJob", "train-run-1") == training
    # Under the mocks the wait measured nothing: the test Job is handed an empty run cost ("{}").
    assert dev.manifest("Job", "eval-run-1") == yaml.safe_load(yaml.safe_dump(specs.test_job(settings, image, "{}")))


def test_every_workload_runs_the_digest_pinned_image(dev):
    image = dev.outputs["imageRef"]
    assert "@sha256:" in image and ":" not in image.split("@")[0].rsplit("/", 1)[1]
    for name in ("prep-run-1", "eval-run-1"):
        assert dev.manifest("Job", name)["spec"]["template"]["spec"]["containers"][0]["image"] == image
    worker = dev.manifest("ElasticJob")["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["image"] == image


def test_elasticjob_contract(dev):
    elasticjob = dev.manifest("ElasticJob")
    spec = elasticjob["spec"]
    assert elasticjob["metadata"]["name"] == "train-run-1" and elasticjob["metadata"]["namespace"] == "training"
    assert spec["rdzvEndpoint"] == "rendezvous-store:29400"
    assert (spec["minReplicas"], spec["replicaSpecs"]["Worker"]["replicas"], spec["maxReplicas"]) == (1, 2, 2)
    # Inert with this controller (nothing sets status.startTime: kubeflow/common @ 0b3a4c3
    # pkg/controller.v1/common/job.go pastActiveDeadline); ElasticJobCompletion keeps the deadline.
    assert "activeDeadlineSeconds" not in spec
    worker_spec = spec["replicaSpecs"]["Worker"]
    assert worker_spec["restartPolicy"] == "ExitCode"
    pod = worker_spec["template"]["spec"]
    # The replica spec's policy is the pods' (kubeflow/common pod.go setRestartPolicy); one in the
    # template is overridden, with a SettedPodTemplateRestartPolicy warning event on every pod.
    assert "restartPolicy" not in pod
    (container,) = pod["containers"]
    assert container["name"] == "elasticjob-worker" and container["command"] == ["python", "-m", "jobs.elastic.agent"]
    args = container["args"]
    assert args[args.index("-m") + 1] == "jobs.training.train"
    assert args[args.index("--epochs") + 1] == "10" and args[args.index("--batch-size") + 1] == "128"
    assert args[args.index("--run-dir") + 1] == "/efs-shared/runs/run-1"
    # The worker pool's nodes (Karpenter launches them for these pods), never a system node.
    assert pod["nodeSelector"] == {"elastic-training/role": "worker"}
    assert worker_spec["template"]["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == {"elastic-training/job": "train-run-1"}
    assert worker_spec["template"]["metadata"]["labels"]["elastic-training/job"] == "train-run-1"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["shared"]["persistentVolumeClaim"] == {"claimName": "efs-pvc"}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/efs-shared", "/dev/shm", "/tmp"} <= mounts
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "15", "memory": "24Gi"}


def worker_command_line(elasticjob: dict) -> list[str]:
    """The worker's command line in the pod our controller's Job creates (tests/worker_pods.py)."""
    return command_line(worker_pod(elasticjob), specs.WORKER_CONTAINER)


def test_controller_injection_gives_a_runnable_torchrun_command_line(dev):
    command = worker_command_line(dev.manifest("ElasticJob"))
    assert command[:7] == [
        "python",
        "-m",
        "jobs.elastic.agent",
        "--rdzv_endpoint=rendezvous-store:29400",
        "--rdzv_id=train-run-1",
        "--nnodes=1:2",
        "--rdzv_backend=reconnecting-c10d",
    ]
    rdzv_ids = [a for a in command if a.startswith("--rdzv_id=")]
    # Ours comes last, so it is the one torchrun uses (tests/jobs/test_rendered_elasticjob.py
    # asserts that through torchrun's own parser).
    assert len(rdzv_ids) == 2 and rdzv_ids[-1].startswith("--rdzv_id=run-1-")


def test_data_prep_and_test_jobs(dev, synth_stack):
    prep = dev.manifest("Job", "prep-run-1")
    container = prep["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "jobs.data.prepare"]
    assert container["args"] == [
        "--dest",
        "/efs-shared/data",
        "--source",
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        "--md5",
        "c58f30108f718f92721af3b95e74349a",
    ]
    smoke_prep = synth_stack("smoke").manifest("Job", "prep-smoke-1")
    assert smoke_prep["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--dest",
        "/efs-shared/data",
        "--synthetic",
        "500",
    ]
    test = dev.manifest("Job", "eval-run-1")
    container = test["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "jobs.results.evaluate"]
    assert container["args"] == [
        "--data",
        "/efs-shared/data/cifar-10-batches-py",
        "--model",
        "/efs-shared/runs/run-1/model.pt",
        "--metrics-out",
        "/efs-shared/runs/run-1/metrics.json",
        "--min-accuracy",
        "0.7",
        "--run-cost",
        "{}",
    ]  # the wait's runCost (infra/components/run_cost.py), none under mocks
    assert test["spec"]["backoffLimit"] == 0
    for job in (prep, test):
        assert job["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
        assert job["spec"]["activeDeadlineSeconds"] == 7200
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
        mounts = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "shared", "mountPath": "/efs-shared"} in mounts


def test_order_prep_then_training_then_test_after_the_platform(dev):
    prep = dev.one("kubernetes:batch/v1:Job", "workloads-data-prep")
    training = dev.one("kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob")
    complete = dev.one("pulumi-python:dynamic:Resource", "workloads-training-complete")
    test = dev.one("kubernetes:batch/v1:Job", "workloads-test")
    platform = {
        dev.one("kubernetes:core/v1:PersistentVolumeClaim", "storage-pvc")["urn"],
        dev.one("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")["urn"],
    }
    platform.add(dev.one("kubernetes:apps/v1:Deployment", "elastic-controller-deployment-elasticjob-controller")["urn"])
    platform.add(dev.one("kubernetes:apps/v1:StatefulSet", "elastic-store-statefulset")["urn"])
    platform.add(dev.one("aws:eks/addon:Addon", "storage-efs-csi-driver")["urn"])
    assert platform <= set(prep["dependsOn"])
    assert {prep["urn"]} | platform <= set(training["dependsOn"])
    assert training["urn"] in complete["dependsOn"]
    assert complete["urn"] in test["dependsOn"]


def test_each_job_has_a_scheduling_guard_beside_it(dev):
    """infra/components/job_scheduling.py: created with the Job's own dependencies, never after the
    Job (its await would hold the guard back until the Job is done)."""
    for job, prefix in (("workloads-data-prep", "prep-"), ("workloads-test", "eval-"), ("workloads-export", "export-")):
        created = dev.one("kubernetes:batch/v1:Job", job)
        guard = dev.one("pulumi-python:dynamic:Resource", f"{job}-scheduling")
        assert set(created["dependsOn"]) <= set(guard["dependsOn"]) and created["urn"] not in guard["dependsOn"]
        assert guard["inputs"]["name"] == dev.manifest("Job", prefix)["metadata"]["name"]
        assert guard["inputs"]["timeoutSeconds"] == 7200 and guard["inputs"]["kubeconfig"] == "[secret]"


def test_waits_and_timeouts(dev):
    complete = dev.one("pulumi-python:dynamic:Resource", "workloads-training-complete")["inputs"]
    assert complete["timeoutSeconds"] == 7200 and complete["name"] == "train-run-1"
    assert complete["namespace"] == "training" and complete["jobLabel"] == "elastic-training/job"
    assert complete["kubeconfig"] == "[secret]"
    # the wait is for this spec: the hash the ElasticJob carries (infra/components/spec_identity.py)
    assert complete["specHash"] == dev.manifest("ElasticJob")["metadata"]["annotations"]["elastic-training/spec-hash"]
    # The provider's own await is off for the ElasticJob (the completion resource waits instead),
    # and on, with the default semantics, for the Jobs.
    assert dev.manifest("ElasticJob")["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "pulumi.com/skipAwait" not in dev.manifest("Job", "prep-")["metadata"]["annotations"]


def _by_urn(synth):
    return {r["urn"]: r for r in synth.resources}


def test_new_run_id_changes_exactly_the_workloads(dev, synth_stack):
    run2 = synth_stack("dev", "runId=run-2")
    before, after = _by_urn(dev), _by_urn(run2)
    assert before.keys() == after.keys()
    changed = {urn for urn in before if before[urn]["inputs"] != after[urn]["inputs"]}
    assert {before[urn]["type"] for urn in changed} == WORKLOAD_TYPES
    # prep, PDB, ElasticJob, its completion, eval, export Job, export role policy, and the three Jobs' guards
    assert len(changed) == 10
    assert run2.manifest("Job", "prep-")["metadata"]["name"] == "prep-run-2"
    assert run2.manifest("ElasticJob")["metadata"]["name"] == "train-run-2"
    assert run2.manifest("Job", "eval-")["metadata"]["name"] == "eval-run-2"
    assert run2.manifest("Job", "export-")["spec"]["template"]["spec"]["containers"][0]["args"][-1].endswith(
        "/runs/run-2"
    )
    assert (
        "/efs-shared/runs/run-2"
        in run2.manifest("ElasticJob")["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    )


def test_same_settings_render_identically(dev, tmp_path):
    from synth_support import load_synth, run_synth

    assert run_synth(tmp_path / "again", "dev").returncode == 0
    again = load_synth(tmp_path / "again")
    assert again.resources == dev.resources and again.manifests == dev.manifests


def test_rendezvous_id_follows_the_pod_shape():
    settings = load_settings(read_stack_file("dev"), "dev")
    first = specs.rendezvous_id(settings, IMAGE)
    assert first.startswith("run-1-") and first == specs.rendezvous_id(settings, IMAGE)
    assert specs.rendezvous_id(settings, IMAGE.replace("0" * 64, "1" * 64)) != first
    more_epochs = load_settings({**read_stack_file("dev"), "elastic-training:epochs": "20"}, "dev")
    assert specs.rendezvous_id(more_epochs, IMAGE) != first


def test_s3_data_source_reads_through_irsa_not_keys(synth_stack):
    synth = synth_stack("dev", "dataSource=s3://my-data/cifar/cifar-10-python.tar.gz")
    role = synth.one("aws:iam/role:Role", "workloads-data-prep-role")
    (statement,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    issuer = statement["Principal"]["Federated"].split("oidc-provider/")[1]
    assert statement["Condition"]["StringLike"] == {f"{issuer}:sub": "system:serviceaccount:training:data-prep"}
    (allow,) = json.loads(synth.one("aws:iam/rolePolicy:RolePolicy", "workloads-data-prep-read")["inputs"]["policy"])[
        "Statement"
    ]
    assert allow == {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::my-data/cifar/cifar-10-python.tar.gz",
    }
    account = synth.manifest("ServiceAccount", "data-prep")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith(
        "arn:aws:iam::123456789012:role/workloads-data-prep-role"
    )
    assert account["automountServiceAccountToken"] is False
    pod = synth.manifest("Job", "prep-")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "data-prep"
    assert pod["containers"][0]["args"][2:4] == ["--source", "s3://my-data/cifar/cifar-10-python.tar.gz"]
    # boto3 gets the region from the stack, not from the instance metadata pods cannot reach
    assert {"name": "AWS_REGION", "value": "us-west-2"} in pod["containers"][0]["env"]
    assert (
        synth.one("kubernetes:core/v1:ServiceAccount", "workloads-data-prep-sa")["urn"]
        in synth.one("kubernetes:batch/v1:Job", "workloads-data-prep")["dependsOn"]
    )


def test_https_data_source_needs_no_aws_identity(dev):
    pod = dev.manifest("Job", "prep-")["spec"]["template"]["spec"]
    assert "serviceAccountName" not in pod
    assert "AWS_REGION" not in {e["name"] for e in pod["containers"][0]["env"]}
    assert not [r for r in dev.resources if "data-prep-role" in r["name"]]


def _selects(selector: dict, labels: dict) -> bool:
    """A label selector of matchLabels only, as Kubernetes evaluates it."""
    assert set(selector) == {"matchLabels"}
    return all(labels.get(key) == value for key, value in selector["matchLabels"].items())


def _pod_templates(synth) -> dict[str, dict]:
    """Every pod template the stack renders, by kind/name."""
    templates = {}
    for obj in synth.manifests:
        spec = obj.get("spec", {})
        if obj["kind"] in ("Job", "Deployment", "StatefulSet"):
            templates[f"{obj['kind']}/{obj['metadata']['name']}"] = spec["template"]
        elif obj["kind"] == "ElasticJob":
            templates[f"ElasticJob/{obj['metadata']['name']}"] = spec["replicaSpecs"]["Worker"]["template"]
    return templates


def test_disruption_budget_guards_exactly_the_runs_workers(dev, synth_stack):
    """A drain may evict workers only down to minWorkers, and the budget counts the run's worker
    pods and nothing else: not data-prep, test, the rendezvous store or the controller, and not another run's
    workers. The Job copies the template's labels onto each worker pod; the controller and the Job
    controller add their own (controller/render.py; batch.kubernetes.io/job-completion-index)."""
    budget = dev.manifest("PodDisruptionBudget", "train-")
    assert budget["spec"]["minAvailable"] == 1 and "maxUnavailable" not in budget["spec"]  # dev: minWorkers 1
    selector = budget["spec"]["selector"]
    other_run = _pod_templates(synth_stack("dev", "runId=run-2"))["ElasticJob/train-run-2"]
    for key, template in {**_pod_templates(dev), "ElasticJob/train-run-2": other_run}.items():
        worker_pod_labels = {
            **template["metadata"]["labels"],
            "group-name": "elastic.pytorch.org",
            "job-name": key.split("/")[1],
            "replica-type": "worker",
            "batch.kubernetes.io/job-completion-index": "0",
        }
        assert _selects(selector, worker_pod_labels) == (key == "ElasticJob/train-run-1"), key
    smoke = synth_stack("smoke").manifest("PodDisruptionBudget", "train-")
    assert smoke["spec"]["minAvailable"] == 2  # smoke: minWorkers 2 == workers, no voluntary eviction at all
    pdb = dev.one("kubernetes:policy/v1:PodDisruptionBudget", "workloads-training-pdb")
    assert pdb["urn"] in dev.one("kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob")["dependsOn"]


def test_eviction_settings_of_the_workers(synth_stack):
    """SIGTERM is answered by jobs.elastic.agent (exit 143, retried by the controller); the grace period
    covers torchrun's own shutdown wait and stays under a Spot notice's two minutes;
    --max_restarts comes from config."""
    synth = synth_stack("dev", "maxRestarts=7")
    pod = synth.manifest("ElasticJob")["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "jobs.elastic.agent"]
    assert specs.TORCHRUN_SHUTDOWN_SECONDS < pod["terminationGracePeriodSeconds"] == specs.WORKER_GRACE_SECONDS < 120
    assert [a for a in container["args"] if a.startswith("--max_restarts")] == ["--max_restarts=7"]
