"""The pipeline's three workloads: data-prep Job -> training ElasticJob -> test Job.

(It is over 400 lines because the three share their pod's parts, volumes, security, placement and image, and
the ElasticJob's worker carries the GPU and EFA requests; split apart, each part would be read beside the others.)

Every name carries the run id, and so does the run directory on EFS: a new `runId` is a new run
next to the old ones, the same `runId` renders identical objects (no change on `pulumi up`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from elastic_training import run_directory
from elastic_training.elasticjob import (
    API_VERSION,
    JOB_LABEL,
    KIND,
    RUN_LABEL,
    TRAINING_COMPONENT,
    WORKER,
    WORKER_CONTAINER,
)
from infra.config import (
    EKS,
    Settings,
    data_md5_for,
    efa_interfaces_per_node,
    gpus_per_node,
    image_pull_policy,
    memory_mib,
    own_training,
    SYNTHETIC_DEFAULT_PER_CLASS,
)
from infra.specs import capacity, efa, gpu
from infra.specs.elastic import RENDEZVOUS_BACKEND, rendezvous_endpoint
from infra.specs.labels import common_labels
from infra.specs.security import container_security_context, pod_security_context, resources
from infra.specs.suppressions import annotate, pinned_by_tag

MOUNT_PATH = "/efs-shared"
DATA_ROOT = f"{MOUNT_PATH}/data"
DATA_DIR = f"{DATA_ROOT}/cifar-10-batches-py"
# WORKER_CONTAINER (the controller reads exit codes from this container name only) and RUN_LABEL: the
# contract's (elastic_training.elasticjob).
# JOB_LABEL ("elastic-training/job"), the contract's too: network_policies.py admits pods by it.
# The worker pod runs jobs.elastic.agent: torchrun, with SIGTERM (an eviction) turned into exit code 143,
# which the controller retries (see jobs/elastic/agent.py).
WORKER_COMMAND = ["python", "-m", "jobs.elastic.agent"]
# On SIGTERM torchrun stops its workers and waits up to 30 s for them before SIGKILL (torch
# distributed/elastic/agent/server/api.py: shutdown_timeout=30); jobs.training.train turns SIGTERM into a
# stop at the next step boundary that all workers agree on, where rank 0 saves (jobs/elastic/stopping.py,
# jobs/elastic/step_boundary.py: about half a second, one step and one save), so a recreated worker resumes
# at the next step. The margin covers the agent's own exit.
# The kubelet SIGKILLs after the pod's grace period, `workerGraceSeconds` (at least these 45 s,
# infra/config/capacity.py; with Spot at most 90, inside the 2-minute notice).
TORCHRUN_SHUTDOWN_SECONDS = 30
WORKER_GRACE_SECONDS = TORCHRUN_SHUTDOWN_SECONDS + 15  # workerGraceSeconds' default and least value
# Small jobs beside the training: the image's Python, the data on EFS. They run on the on-demand system
# nodes beside Karpenter, CoreDNS and the other system pods (infra/config/node_fit.py checks the sum):
# half a CPU is what two m5.large system nodes keep for them whichever way those pods spread
# (docs/design-notes.md, "Where the side Jobs run").
SIDE_JOB_CPU = "500m"
SIDE_JOB_MEMORY = "4Gi"
DATA_PREP_SERVICE_ACCOUNT = "data-prep"
EXPORT_SERVICE_ACCOUNT = "export"
# /dev/shm of a worker: DataLoader workers, gloo and NCCL's intra-node transport share memory there,
# and the container runtime's default is 64Mi. On GPU stacks it is half the worker's memory (a
# memory-medium emptyDir counts against the container's memory limit), at most 8Gi; config.py
# refuses a workerMemory that leaves less than config.NCCL_SHM_MIN_MIB.
SHM_SIZE_LIMIT = "8Gi"
SHM_MAX_MIB = 8 * 1024


@dataclass(frozen=True)
class WorkloadNames:
    data_prep: str
    training: str
    test: str
    export: str


def names(run_id: str) -> WorkloadNames:
    return WorkloadNames(
        data_prep=f"prep-{run_id}", training=f"train-{run_id}", test=f"eval-{run_id}", export=f"export-{run_id}"
    )


def run_dir(run_id: str) -> str:
    return f"{MOUNT_PATH}/runs/{run_id}"


def run_environment(settings: Settings) -> list[dict[str, Any]]:
    """Where this run's directory and the prepared data are (elastic_training.run_directory): every
    workload's container gets them, whatever command it runs; the controller reads the run directory
    from the worker container's (controller/progress.py)."""
    return [
        {"name": run_directory.RUN_DIR_ENV, "value": run_dir(settings.run_id)},
        {"name": run_directory.DATA_DIR_ENV, "value": DATA_ROOT},
    ]


def rendezvous_id(settings: Settings, image: str) -> str:
    """torchrun's rendezvous id: the run id plus a hash of everything that shapes the training pods.

    The rendezvous store keeps a finished rendezvous closed until it restarts, so a re-created
    ElasticJob (new image, new sizes) must not reuse its predecessor's id; an unchanged spec keeps its id, so the same run
    renders the same object."""
    shape = {
        "image": image,
        "workers": [settings.min_workers, settings.workers, settings.max_workers],
        "epochs": settings.epochs,
        "batch": settings.batch_size,
        "cpu": settings.worker_cpu,
        "memory": settings.worker_memory,
        "deadline": settings.job_timeout_minutes,
        "checkpoint": settings.checkpoint_every_seconds,
        "grace": settings.worker_grace_seconds,
    }
    if settings.training_command:  # only when set: the CIFAR-10 job's runs keep their ids
        shape["command"] = list(settings.training_command)
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]
    return f"{settings.run_id}-{digest}"


def _labels(component: str, job: str, run_id: str) -> dict[str, str]:
    return {**common_labels(component), RUN_LABEL: run_id, JOB_LABEL: job}


def shm_size_limit(settings: Settings) -> str:
    """8Gi on CPU stacks (as before); on GPU stacks half the worker memory, at most 8Gi."""
    if not gpus_per_node(settings):
        return SHM_SIZE_LIMIT
    return f"{min(SHM_MAX_MIB, int(memory_mib(settings.worker_memory) // 2))}Mi"


def _volumes(settings: Settings, shm: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts): the shared EFS claim, and in-memory /tmp (the root filesystem is read-only)."""
    volumes = [
        {"name": "shared", "persistentVolumeClaim": {"claimName": settings.pvc_name}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
    ]
    mounts = [{"name": "shared", "mountPath": MOUNT_PATH}, {"name": "tmp", "mountPath": "/tmp"}]
    if shm:
        # DataLoader workers, gloo and NCCL share memory through /dev/shm (SHM_SIZE_LIMIT).
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size_limit(settings)}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    return volumes, mounts


def pull_policy(settings: Settings) -> str:
    """The image the stack builds runs by digest (IfNotPresent); an `imageUri` gets the policy its
    reference calls for (infra/config/ image_pull_policy)."""
    return image_pull_policy(settings.image_uri) if settings.image_uri else "IfNotPresent"


def _container(
    name: str,
    image: Any,
    command: list[str],
    args: list[Any],
    cpu: str,
    memory: str,
    mounts: list[dict[str, Any]],
    pull: str,
    env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": pull,
        "command": command,
        "args": args,
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}, *(env or [])],
        "resources": resources(cpu, memory),
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }


def _pod_spec(containers: list[dict[str, Any]], volumes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        # None of the workloads talks to the Kubernetes API.
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(),
        "containers": containers,
        "volumes": volumes,
        **extra,
    }


def image_by_tag(settings: Settings) -> bool:
    """Whether the stack's own `imageUri` names a tag (not a digest): its objects get the tag rows (suppressions.py)."""
    return pinned_by_tag(settings.image_uri) if settings.image_uri else False


def _job(
    name: str,
    component: str,
    settings: Settings,
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    backoff_limit: int,
    **pod_extra: Any,
) -> dict[str, Any]:
    labels = _labels(component, name, settings.run_id)
    return annotate(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": settings.namespace,
                "labels": labels,
                # A Job that failed is replaced by the next `pulumi up` instead of being re-awaited.
                "annotations": {"pulumi.com/replaceUnready": "true"},
            },
            "spec": {
                "backoffLimit": backoff_limit,
                "activeDeadlineSeconds": settings.job_timeout_minutes * 60,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"restartPolicy": "Never", **_pod_spec([container], volumes, **pod_extra)},
                },
            },
        },
        image_by_tag=image_by_tag(settings),
    )


def reads_from_s3(settings: Settings) -> bool:
    return settings.data_source.startswith("s3://")


def s3_object_arn(data_source: str) -> str:
    bucket, _, key = data_source.removeprefix("s3://").partition("/")
    return f"arn:aws:s3:::{bucket}/{key}"


def irsa_service_account(settings: Settings, name: str, component: str, role_arn: Any) -> dict[str, Any]:
    """A workload's identity in AWS: IRSA maps the service account to an IAM role (whose policy
    says what it may do). The EKS pod identity webhook projects its web-identity token into the
    pod; the Kubernetes API token stays unmounted."""
    return annotate(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": name,
                "namespace": settings.namespace,
                "labels": common_labels(component),
                "annotations": {"eks.amazonaws.com/role-arn": role_arn},
            },
            "automountServiceAccountToken": False,
        }
    )


def data_prep_service_account(settings: Settings, role_arn: Any) -> dict[str, Any]:
    """The identity data-prep reads an s3:// dataSource with (a role that may read that one object)."""
    return irsa_service_account(settings, DATA_PREP_SERVICE_ACCOUNT, "data-prep", role_arn)


def aws_region_env(settings: Settings) -> list[dict[str, Any]]:
    """The stack's region for boto3 in a pod: botocore would otherwise ask the instance metadata
    service, which pods cannot reach (the nodes' IMDS hop limit is 1, infra/components/cluster.py)."""
    return [{"name": "AWS_REGION", "value": settings.region}]


def data_prep_args(settings: Settings) -> list[str]:
    args = ["--dest", DATA_ROOT]
    if settings.data_source.startswith("synthetic"):
        per_class = settings.data_source.partition(":")[2] or str(SYNTHETIC_DEFAULT_PER_CLASS)
        return [*args, "--synthetic", per_class]
    args += ["--source", settings.data_source]
    md5 = data_md5_for(settings)
    return [*args, "--md5", md5] if md5 else args


def data_prep_job(settings: Settings, image: Any) -> dict[str, Any]:
    volumes, mounts = _volumes(settings)
    region = aws_region_env(settings) if reads_from_s3(settings) else []
    command, args = (
        (list(settings.data_prep_command), [])
        if settings.data_prep_command
        else (["python", "-m", "jobs.data.prepare"], data_prep_args(settings))
    )
    container = _container(
        "prepare",
        image,
        command,
        args,
        SIDE_JOB_CPU,
        SIDE_JOB_MEMORY,
        mounts,
        pull_policy(settings),
        run_environment(settings) + region,
    )
    identity = {"serviceAccountName": DATA_PREP_SERVICE_ACCOUNT} if reads_from_s3(settings) else {}
    return _job(
        names(settings.run_id).data_prep, "data-prep", settings, container, volumes, backoff_limit=2, **identity
    )


def training_args(settings: Settings, rdzv_id_arg: Any) -> list[Any]:
    """torchrun's arguments after the controller's prepended --rdzv_endpoint/--rdzv_id/--nnodes
    (controller/render.py rendezvous_args). Our "--rdzv_backend=..." and "--rdzv_id=..." come later and win
    (argparse keeps the last value), also after the archived controller's --rdzv_backend=etcd."""
    return [
        # torch's dynamic rendezvous on our store (jobs/elastic/rendezvous.py), not torch's retired etcd one;
        # the backend is the template's to name (the controller prepends only where and who).
        f"--rdzv_backend={RENDEZVOUS_BACKEND}",
        # One local worker per GPU of the node (each takes cuda:LOCAL_RANK, jobs/training/runtime.py), one on CPU.
        f"--nproc_per_node={max(1, gpus_per_node(settings))}",
        # Each re-formation after a lost peer uses one restart; when none is left, torchrun exits 1,
        # which the Job counts against backoffLimitPerIndex (controller/exit_codes.py).
        f"--max_restarts={settings.max_restarts}",
        # Advertise the pod IP: peers reach it directly, without resolving the pod's hostname.
        "--local_addr=$(POD_IP)",
        rdzv_id_arg,
        *training_target(settings),
    ]


def training_target(settings: Settings) -> list[str]:
    """What torchrun runs in every worker: the stack's trainingCommand (its python dropped: torchrun starts
    the interpreter), or the CIFAR-10 job."""
    if settings.training_command:
        target = own_training.torchrun_target(list(settings.training_command))
        assert target is not None, "the config checks refuse any other trainingCommand before anything renders"
        return target
    return [
        "-m",
        "jobs.training.train",
        "--data",
        DATA_DIR,
        "--run-dir",
        run_dir(settings.run_id),
        "--epochs",
        str(settings.epochs),
        "--batch-size",
        str(settings.batch_size),
        # auto is the worker's own default: passed only when the stack asks for another.
        *(["--precision", settings.precision] if settings.precision != "auto" else []),
        # A time checkpoint within the epoch: what a preemption can cost at most.
        "--checkpoint-every-seconds",
        str(settings.checkpoint_every_seconds),
    ]


def worker_placement(settings: Settings, job_name: str) -> dict[str, Any]:
    """Where the worker pods may run.

    - workersPerNode 1: a required pod anti-affinity on the host name, so no two workers of this job
      share a node. Above 1 there is none: Kubernetes has no "at most N per node" rule that the
      controller would pass on (topologySpreadConstraints came in Kubernetes 1.16, after the
      k8s.io/api v0.15 types it copies pods through, upstream-facts.md fact 1), so the workers'
      CPU and memory requests decide how many share a node; with ReadWriteOnce storage the volume's
      node affinity puts them all on its node.
    - target eks: the worker pool's nodes (their role label), whose taint the workers alone
      tolerate (infra/specs/capacity.py); Karpenter launches those nodes for the pending workers. An
      existing cluster's nodes carry whatever labels their owner gave them, so none is required there."""
    placement: dict[str, Any] = {}
    if settings.workers_per_node == 1:
        placement["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {JOB_LABEL: job_name}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    gpu_stack = gpus_per_node(settings) > 0
    if settings.target == EKS:
        placement["nodeSelector"] = capacity.worker_node_labels(gpu_stack)
        placement["tolerations"] = capacity.worker_tolerations(gpu_stack)
    elif gpu_stack:
        placement["tolerations"] = [gpu.gpu_toleration()]
    return placement


def elastic_job(settings: Settings, image: Any, rdzv_id_arg: Any) -> dict[str, Any]:
    """`rdzv_id_arg` is the whole "--rdzv_id=..." argument (a string, or an Output of one)."""
    name = names(settings.run_id).training
    labels = _labels(TRAINING_COMPONENT, name, settings.run_id)
    volumes, mounts = _volumes(settings, shm=True)
    env = [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, *run_environment(settings)]
    worker = _container(
        WORKER_CONTAINER,
        image,
        WORKER_COMMAND,
        training_args(settings, rdzv_id_arg),
        settings.worker_cpu,
        settings.worker_memory,
        mounts,
        pull_policy(settings),
        env,
    )
    gpus = gpus_per_node(settings)
    if gpus:
        # Every GPU of the node (an extended resource: the limit is the request, Kubernetes docs
        # "Schedule GPUs"); the toleration of the GPU nodes' taint is in worker_placement.
        for bound in ("requests", "limits"):
            worker["resources"][bound][gpu.GPU_RESOURCE] = str(gpus)
    interfaces = efa_interfaces_per_node(settings)
    if interfaces:
        # Every EFA interface of the node, likewise: Karpenter attaches them to a node only for a pod
        # that requests them (infra/specs/efa.py).
        for bound in ("requests", "limits"):
            worker["resources"][bound][efa.EFA_RESOURCE] = str(interfaces)
    pod = _pod_spec(
        [worker],
        volumes,
        **worker_placement(settings, name),
        terminationGracePeriodSeconds=settings.worker_grace_seconds,
    )
    # No voluntary disruption (consolidation, drift) of a node while a worker runs there; our
    # controller puts the replica template, annotations included, in its Job (controller/render.py).
    template_metadata = {"labels": labels}
    if settings.target == EKS:
        template_metadata["annotations"] = capacity.worker_pod_annotations()
    # Our controller never writes the spec (controller/reconcile.py), so a refresh finds it as written.
    return annotate(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": name,
                "namespace": settings.namespace,
                "labels": labels,
                # Completion is awaited by the ElasticJobCompletion resource, which can tell a
                # failed worker from a deadline; the provider's generic await cannot.
                "annotations": {"pulumi.com/skipAwait": "true"},
            },
            "spec": {
                "rdzvEndpoint": rendezvous_endpoint(),
                "minReplicas": settings.min_workers,
                "maxReplicas": settings.max_workers,
                # No activeDeadlineSeconds: the deadline is ElasticJobCompletion's (jobTimeoutMinutes),
                # which can tell a deadline from a failed worker (our controller would pass one on to
                # its Job, controller/render.py).
                # No cleanPodPolicy: our controller deletes a finished run's pods only with
                # cleanPodPolicy All (controller/reconcile.py), so without one `kubectl logs` works
                # after a successful run.
                "replicaSpecs": {
                    WORKER: {
                        "replicas": settings.workers,
                        # Our controller's Job runs the pods with restartPolicy Never whatever this says (its
                        # podFailurePolicy needs it, controller/render.py); ExitCode is the archived
                        # controller's name for the same behaviour, which the CRD still accepts.
                        "restartPolicy": "ExitCode",
                        "template": {"metadata": template_metadata, "spec": pod},
                    }
                },
            },
        }
    )


def worker_disruption_budget(settings: Settings) -> dict[str, Any]:
    """Voluntary disruptions (a drain for a node-group upgrade or scale-in, which the managed node
    group honours for up to 15 minutes) never take the run below minWorkers at once.

    The worker pods belong to the ElasticJob's Job (controller/render.py), not a Deployment,
    ReplicaSet or StatefulSet, and for such pods a PodDisruptionBudget may only use an integer `minAvailable` (Kubernetes docs,
    "Specifying a Disruption Budget for your Application", arbitrary workloads and controllers).
    The selector is the run's job label: the Job copies the template's labels onto every
    worker pod, and no other pod carries this training's name under that key."""
    name = names(settings.run_id).training
    return annotate(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": name,
                "namespace": settings.namespace,
                "labels": _labels(TRAINING_COMPONENT, name, settings.run_id),
            },
            "spec": {"minAvailable": settings.min_workers, "selector": {"matchLabels": {JOB_LABEL: name}}},
        }
    )


def test_job(settings: Settings, image: Any, run_cost: Any = None) -> dict[str, Any]:
    """`run_cost`: the wait's measure of the run (JSON text), which the Job keeps in the run's history."""
    volumes, mounts = _volumes(settings)
    directory = run_dir(settings.run_id)
    cost = ["--run-cost", run_cost] if run_cost is not None else []
    gate = str(own_training.gate(settings))
    # An own testCommand runs under the gate on the metric it writes (jobs.results.gate); else the CIFAR-10 evaluation.
    command, args = (
        (
            ["python", "-m", "jobs.results.gate", "--metric", settings.gate_metric, "--min", gate, *cost],
            ["--", *settings.test_command],
        )
        if settings.test_command
        else (
            ["python", "-m", "jobs.results.evaluate"],
            [
                "--data",
                DATA_DIR,
                "--model",
                f"{directory}/{run_directory.MODEL}",
                "--metrics-out",
                f"{directory}/{run_directory.METRICS}",
                "--min-accuracy",
                gate,
                *cost,
            ],
        )
    )
    container = _container(
        "evaluate",
        image,
        command,
        args,
        SIDE_JOB_CPU,
        SIDE_JOB_MEMORY,
        mounts,
        pull_policy(settings),
        run_environment(settings),
    )
    # No retries: a model below the accuracy gate stays below it.
    return _job(names(settings.run_id).test, "evaluation", settings, container, volumes, backoff_limit=0)


def export_service_account(settings: Settings, role_arn: Any) -> dict[str, Any]:
    """The export Job's identity (a role that may write this run's prefix only)."""
    return irsa_service_account(settings, EXPORT_SERVICE_ACCOUNT, "export", role_arn)


def export_job(settings: Settings, image: Any, destination: Any) -> dict[str, Any]:
    """python -m jobs.results.export: the run's model.pt, metrics.json (and history.jsonl) to `destination`
    (s3://<bucket>/runs/<runId>, a string or an Output of one)."""
    volumes, mounts = _volumes(settings)
    container = _container(
        "export",
        image,
        ["python", "-m", "jobs.results.export"],
        ["--run-dir", run_dir(settings.run_id), "--dest", destination],
        SIDE_JOB_CPU,
        SIDE_JOB_MEMORY,
        mounts,
        pull_policy(settings),
        aws_region_env(settings),
    )
    # Retries are safe: an object already there with the same checksum is not uploaded again.
    return _job(
        names(settings.run_id).export,
        "export",
        settings,
        container,
        volumes,
        backoff_limit=2,
        serviceAccountName=EXPORT_SERVICE_ACCOUNT,
    )
