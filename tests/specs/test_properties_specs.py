"""The Kubernetes objects as properties, from the pure builders (no synth): every setting reaches its
own field and no other (settings chosen so that no two coincide), and every NetworkPolicy admits
exactly what it names and nothing more."""

from __future__ import annotations

import copy
import dataclasses
from datetime import date

import pytest

from infra.config import CIFAR10_MD5, PROJECT, load_settings
from elastic_training.elasticjob import JOB_LABEL
from infra.specs import elastic, network_policies, workloads
from infra.specs.labels import PART_OF

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "0" * 64
TODAY = date(2026, 11, 25)


def settings(**keys: str):
    raw = {"aws:region": "eu-west-1", f"{PROJECT}:apiAllowedCidrs": '["203.0.113.0/24"]'}
    return load_settings({**raw, **{f"{PROJECT}:{k}": v for k, v in keys.items()}}, "test", today=TODAY)


# Every count different from every other, so a field wired to the wrong setting shows.
DISTINCT = dict(
    nodeMaxCount="9",
    minWorkers="2",
    workers="3",
    maxWorkers="4",
    maxRestarts="6",
    workerGraceSeconds="50",
    checkpointEverySeconds="13",
    epochs="7",
    batchSize="64",
    jobTimeoutMinutes="11",
    minAccuracy="0.55",
    workerCpu="3",
    workerMemory="5Gi",
    namespace="ml",
    pvcName="claim",
    runId="r-8",
    nodeInstanceType="m5.2xlarge",
)


def test_the_elastic_job_wires_each_worker_count_to_its_own_field():
    s = settings(**DISTINCT)
    job = workloads.elastic_job(s, IMAGE, "--rdzv_id=x")
    spec = job["spec"]
    assert (spec["minReplicas"], spec["replicaSpecs"]["Worker"]["replicas"], spec["maxReplicas"]) == (2, 3, 4)
    pod = spec["replicaSpecs"]["Worker"]["template"]["spec"]
    (worker,) = pod["containers"]
    assert worker["name"] == workloads.WORKER_CONTAINER and worker["image"] == IMAGE
    assert worker["command"] == workloads.WORKER_COMMAND
    assert worker["args"] == [
        "--rdzv_backend=reconnecting-c10d",
        "--nproc_per_node=1",
        "--max_restarts=6",
        "--local_addr=$(POD_IP)",
        "--rdzv_id=x",
        "-m",
        "jobs.training.train",
        "--data",
        workloads.DATA_DIR,
        "--run-dir",
        "/efs-shared/runs/r-8",
        "--epochs",
        "7",
        "--batch-size",
        "64",
        "--checkpoint-every-seconds",
        "13",
    ]
    assert worker["resources"]["requests"] == worker["resources"]["limits"] == {"cpu": "3", "memory": "5Gi"}
    assert pod["nodeSelector"] == {"elastic-training/role": "worker"}
    assert pod["terminationGracePeriodSeconds"] == 50
    assert job["metadata"]["namespace"] == "ml" and job["metadata"]["name"] == "train-r-8"
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "claim"}} in pod["volumes"]


def test_the_disruption_budget_keeps_exactly_min_workers_of_this_run():
    budget = workloads.worker_disruption_budget(settings(**DISTINCT))
    assert budget["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {JOB_LABEL: "train-r-8"}}}
    assert budget["metadata"]["namespace"] == "ml"


def test_the_test_job_gates_at_exactly_min_accuracy_with_no_retry():
    job = workloads.test_job(settings(**DISTINCT), IMAGE)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--data",
        workloads.DATA_DIR,
        "--model",
        "/efs-shared/runs/r-8/model.pt",
        "--metrics-out",
        "/efs-shared/runs/r-8/metrics.json",
        "--min-accuracy",
        "0.55",
    ]
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 11 * 60
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize(
    "source, md5, args",
    [
        ("synthetic", CIFAR10_MD5, ["--synthetic", "1000"]),
        ("synthetic:7", "", ["--synthetic", "7"]),
        ("https://h/c.tgz", CIFAR10_MD5, ["--source", "https://h/c.tgz", "--md5", CIFAR10_MD5]),
        ("https://h/c.tgz", "", ["--source", "https://h/c.tgz"]),
        ("s3://b/k.tgz", "a" * 32, ["--source", "s3://b/k.tgz", "--md5", "a" * 32]),
    ],
)
def test_data_prep_passes_the_source_and_its_checksum_and_nothing_else(source, md5, args):
    s = settings(dataSource=source, dataMd5=md5)
    assert workloads.data_prep_args(s) == ["--dest", workloads.DATA_ROOT, *args]
    job = workloads.data_prep_job(s, IMAGE)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == workloads.data_prep_args(s) and container["command"] == [
        "python",
        "-m",
        "jobs.data.prepare",
    ]
    on_s3 = source.startswith("s3://")
    assert workloads.reads_from_s3(s) is on_s3
    # Only an s3:// source gets an AWS identity and the bucket's region.
    assert pod.get("serviceAccountName") == (workloads.DATA_PREP_SERVICE_ACCOUNT if on_s3 else None)
    assert ({"name": "AWS_REGION", "value": "eu-west-1"} in container["env"]) is on_s3
    assert job["spec"]["backoffLimit"] == 2


def test_the_s3_object_arn_is_the_one_object():
    assert workloads.s3_object_arn("s3://bucket/a/b.tgz") == "arn:aws:s3:::bucket/a/b.tgz"


def test_the_data_prep_service_account_carries_the_role_and_no_api_token():
    account = workloads.data_prep_service_account(settings(namespace="ml"), "arn:aws:iam::123456789012:role/r")
    assert account["metadata"]["name"] == "data-prep" and account["metadata"]["namespace"] == "ml"
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/r"}
    assert account["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    "key, value",
    [
        ("minWorkers", "1"),
        ("workers", "4"),
        ("maxWorkers", "5"),
        ("epochs", "8"),
        ("batchSize", "32"),
        ("workerCpu", "2"),
        ("workerMemory", "6Gi"),
        ("jobTimeoutMinutes", "12"),
    ],
)
def test_the_rendezvous_id_changes_with_every_pod_shaping_setting(key, value):
    base = settings(**DISTINCT)
    changed = settings(**{**DISTINCT, key: value})
    assert workloads.rendezvous_id(base, IMAGE) == workloads.rendezvous_id(settings(**DISTINCT), IMAGE)
    assert workloads.rendezvous_id(base, IMAGE) != workloads.rendezvous_id(changed, IMAGE)
    assert (
        workloads.rendezvous_id(base, IMAGE).startswith("r-8-")
        and len(workloads.rendezvous_id(base, IMAGE)) == len("r-8-") + 8
    )


def test_the_rendezvous_id_changes_with_the_image_and_not_with_the_accuracy_gate():
    base = settings(**DISTINCT)
    assert workloads.rendezvous_id(base, IMAGE) != workloads.rendezvous_id(base, IMAGE.replace("0" * 64, "1" * 64))
    assert workloads.rendezvous_id(base, IMAGE) == workloads.rendezvous_id(
        settings(**{**DISTINCT, "minAccuracy": "0.9"}), IMAGE
    )


# --- NetworkPolicies: exactly this and nothing more ---------------------------------------------


def by_name(policies):
    return {p["metadata"]["name"]: p for p in policies}


def test_the_store_admits_training_pods_on_its_port_only():
    policies = by_name(network_policies.workload_network_policies("ml"))
    assert set(policies) == {"deny-ingress", "store-from-training", "training-peers"}
    store = policies["store-from-training"]
    assert store["metadata"]["namespace"] == "ml"
    assert store["spec"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "rendezvous-store"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {
                        "podSelector": {
                            "matchLabels": {"app.kubernetes.io/component": "training"},
                            "matchExpressions": [{"key": "elastic-training/job", "operator": "Exists"}],
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": 29400}],
            }
        ],
    }
    # The port the policy opens is the one the store listens on and its Service targets.
    service, _budget, deployment = elastic.store_objects("ml", "trainer:1", "IfNotPresent")
    assert service["spec"]["ports"][0]["targetPort"] == store["spec"]["ingress"][0]["ports"][0]["port"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 29400
    assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "rendezvous-store"
    assert elastic.rendezvous_endpoint() == "rendezvous-store:29400"


def test_training_peers_admit_training_pods_only_and_everything_else_is_denied():
    policies = by_name(network_policies.workload_network_policies("ml"))
    assert policies["training-peers"]["spec"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/component": "training"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": network_policies.TRAINING_PODS}]}],
    }
    # No "ingress": [] for deny: the API server drops an empty list, and a read-back would differ (tests/cluster).
    assert policies["deny-ingress"]["spec"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}},
        "policyTypes": ["Ingress"],
    }


def test_the_training_pods_carry_the_labels_the_policies_admit():
    job = workloads.elastic_job(settings(**DISTINCT), IMAGE, "--rdzv_id=x")
    labels = job["spec"]["replicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "training" and labels[JOB_LABEL] == "train-r-8"
    assert labels["app.kubernetes.io/part-of"] == PART_OF
    for other in (workloads.data_prep_job(settings(), IMAGE), workloads.test_job(settings(), IMAGE)):
        assert other["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] != "training"


def test_the_crd_copy_is_the_callers_to_change():
    crd = elastic.elasticjob_crd()
    pristine = copy.deepcopy(elastic.elasticjob_crd())
    crd["spec"]["versions"].clear()
    assert elastic.elasticjob_crd() == pristine
    assert pristine["metadata"]["labels"]["app.kubernetes.io/name"] == "elasticjobs"
    assert elastic.elasticjob_schema() == pristine["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


# --- the platform's objects: consistent with each other, restricted, and reviewed whole ---------


def controller_objects() -> list[dict]:
    return elastic.controller_objects("ml", IMAGE, "efs-pvc")


def test_the_controllers_role_is_namespaced_bound_to_its_account_and_never_creates_pods():
    objects = controller_objects()
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Deployment",
    ]
    account, role, binding, policy, policy_binding, deployment = objects
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"] == elastic.CONTROLLER_NAME
    assert {o["metadata"]["namespace"] for o in (account, role, binding, deployment)} == {"ml"}
    # cluster-scoped, named for the namespace, matching only the controller's own requests in it
    assert "namespace" not in policy["metadata"] and policy_binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert policy["spec"]["matchConditions"] == [
        {
            "name": "the-elasticjob-controller",
            "expression": "request.userInfo.username == 'system:serviceaccount:ml:elasticjob-controller'",
        }
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": elastic.CONTROLLER_NAME, "namespace": "ml"}]
    verbs = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert "create" not in verbs[("", "pods")] and ("", "pods/status") not in verbs
    assert verbs[("elastic.pytorch.org", "elasticjobs")] == {"get", "list", "watch", "delete"}  # never update/patch
    assert verbs[("elastic.pytorch.org", "elasticjobs/status")] == {"get", "patch"}
    lease_rules = [rule for rule in role["rules"] if rule["apiGroups"] == ["coordination.k8s.io"]]
    assert [(set(r["verbs"]), r.get("resourceNames")) for r in lease_rules] == [
        ({"get", "update"}, [elastic.CONTROLLER_LEASE]),
        ({"create"}, None),
    ]


def test_the_controller_runs_from_the_training_image_and_reads_the_shared_volume_read_only():
    *_, deployment = controller_objects()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["command"]) == (IMAGE, ["python", "-m", "controller"])
    assert container["volumeMounts"] == [
        {"name": "shared", "mountPath": elastic.CONTROLLER_SHARED_MOUNT, "readOnly": True}
    ]
    assert f"--shared-root={elastic.CONTROLLER_SHARED_MOUNT}" in container["args"]
    assert deployment["spec"]["template"]["spec"]["volumes"] == [
        {"name": "shared", "persistentVolumeClaim": {"claimName": "efs-pvc", "readOnly": True}}
    ]
    assert elastic.CONTROLLER_SHARED_MOUNT == workloads.MOUNT_PATH  # the workers' run directories are paths there too


@pytest.mark.parametrize(
    "objects",
    [controller_objects(), elastic.store_objects("ml", "trainer:1", "IfNotPresent")],
    ids=["controller", "store"],
)
def test_each_deployment_selects_its_own_pods_and_they_meet_the_restricted_level(objects):
    from pod_security import violations

    (deployment,) = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    template = deployment["spec"]["template"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    assert deployment["spec"]["replicas"] == 1
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}
    assert not {k: v for k, v in violations(pod, "restricted").items() if v}
    for service in (o for o in objects if o["kind"] == "Service"):
        assert service["spec"]["selector"] == selector


def test_the_store_serves_on_the_port_the_endpoint_names():
    *_, deployment = elastic.store_objects("ml", "trainer:1", "IfNotPresent")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert f"--port={elastic.rendezvous_endpoint().rsplit(':', 1)[1]}" in container["args"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["tcpSocket"] == {"port": 29400}
    assert {o["metadata"]["namespace"] for o in elastic.store_objects("ml", "trainer:1", "IfNotPresent")} == {"ml"}


def test_the_claim_is_pre_bound_to_the_volume_of_the_class_the_driver_serves():
    from infra.specs import storage

    klass = storage.storage_class("efs-sc")
    volume = storage.persistent_volume("efs-pv", "efs-sc", "fs-1::fsap-1")
    claim = storage.persistent_volume_claim("efs-pvc", "ml", "efs-sc", "efs-pv")
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert claim["spec"]["storageClassName"] == volume["spec"]["storageClassName"] == klass["metadata"]["name"]
    assert claim["spec"]["accessModes"] == volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == volume["spec"]["capacity"]["storage"]
    assert volume["spec"]["csi"] == {"driver": klass["provisioner"], "volumeHandle": "fs-1::fsap-1"}
    assert volume["spec"]["mountOptions"] == ["tls"] and volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert claim["metadata"]["namespace"] == "ml" and "namespace" not in volume["metadata"]


def platform_objects() -> dict[str, object]:
    from infra.specs import gpu, node_config, rendezvous_store, storage

    return {
        "controller": elastic.controller_objects("training", IMAGE, "efs-pvc"),
        "rendezvous-store": [
            *elastic.store_objects("training", "TRAINING_IMAGE", "IfNotPresent"),
            rendezvous_store.priority_class(),
        ],
        "network-policies": network_policies.workload_network_policies("training"),
        "namespaces": [elastic.namespace("training", "workloads", elastic.WORKLOAD_NAMESPACE_ENFORCE)],
        "storage": [
            storage.storage_class("efs-sc"),
            storage.persistent_volume("efs-pv", "efs-sc", "fs-1::fsap-1"),
            storage.persistent_volume_claim("efs-pvc", "training", "efs-sc", "efs-pv"),
        ],
        "crd-metadata": elastic.elasticjob_crd()["metadata"],
        "data-prep-service-account": workloads.data_prep_service_account(
            settings(), "arn:aws:iam::123456789012:role/r"
        ),
        "node-user-data": node_config.user_data(node_config.node_config()),
        "node-user-data-base64": node_config.launch_template_user_data(),
        "gpu-device-plugin": [gpu.device_plugin_daemonset(), gpu.device_plugin_network_policy()],
        "gpu-node-taint-toleration": gpu.gpu_toleration(),
        "provisioned-claim": storage.provisioned_claim("claim", "training", "standard", "ReadWriteOnce"),
        "export": [
            workloads.export_service_account(settings(), "arn:aws:iam::123456789012:role/export"),
            workloads.export_job(settings(), IMAGE, "s3://artifacts/runs/run-1"),
        ],
    }


def test_the_platform_objects_match_their_golden_file():
    """The reviewed whole: UPDATE_GOLDEN=1 rewrites tests/golden/platform-objects.yaml (as
    tests/specs/test_workloads.py does for the workloads); the diff then shows in review."""
    import os
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[1] / "golden" / "platform-objects.yaml"
    rendered = platform_objects()
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(yaml.safe_dump(rendered, sort_keys=True))
    assert yaml.safe_load(path.read_text()) == rendered


def test_suppressions_apply_to_their_kind_and_component_only_and_number_from_one():
    from infra.specs import suppressions

    assert suppressions.suppressions_for({"kind": "Deployment"}) == []
    assert suppressions.suppressions_for({"kind": "Deployment", "metadata": {}}) == []
    assert (
        suppressions.suppressions_for(
            {"kind": "Service", "metadata": {"labels": {"app.kubernetes.io/component": "rendezvous"}}}
        )
        == []
    )
    controller = {"kind": "Deployment", "metadata": {"labels": {"app.kubernetes.io/component": "elastic-controller"}}}
    annotated = suppressions.annotate(controller)
    assert annotated is controller
    assert annotated["metadata"]["annotations"] == {
        f"checkov.io/skip{i}": f"{check}={reason}"
        for i, (check, reason) in enumerate(suppressions.SUPPRESSIONS[suppressions.CONTROLLER], start=1)
    }
    plain = {"kind": "Service", "metadata": {"name": "x"}}
    assert suppressions.annotate(plain) == {"kind": "Service", "metadata": {"name": "x"}}


def test_the_security_page_carries_the_suppression_table():
    from pathlib import Path

    from infra.specs import suppressions

    table = suppressions.markdown_table()
    assert table.startswith("| Check | Object | Reason |\n|---|---|---|\n") and table.endswith("|\n")
    assert len(table.splitlines()) == (
        2 + sum(len(e) for e in suppressions.SUPPRESSIONS.values()) + len(suppressions.TAG_PINNED_IMAGE)
    )
    assert table in (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()


def test_each_third_party_image_reason_names_its_image():
    # SUPPRESSIONS is built at import time, so the reason builder is checked here directly.
    from infra import versions
    from infra.specs import suppressions

    for key, image in ((suppressions.DEVICE_PLUGIN, versions.NVIDIA_DEVICE_PLUGIN_IMAGE),):
        reason = dict(suppressions.SUPPRESSIONS[key])["CKV_K8S_43"]
        assert suppressions._third_party_image(image) == reason and image in reason


# --- GPU workers: every GPU of the node, requested and limited alike, and the taint tolerated ----------


@pytest.mark.parametrize("instance_type, gpus", [("g6.xlarge", 1), ("g6.12xlarge", 4)])
def test_a_gpu_worker_takes_every_gpu_of_its_node_and_tolerates_exactly_the_gpu_taint(instance_type, gpus):
    from infra.specs import efa, gpu

    job = workloads.elastic_job(
        settings(**{**DISTINCT, "nodeInstanceType": instance_type, "workerMemory": "12Gi"}), IMAGE, "--rdzv_id=x"
    )
    pod = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    (worker,) = pod["containers"]
    # An extended resource's limit must equal its request (Kubernetes docs, "Schedule GPUs").
    # A type with EFA (g6.12xlarge: infra/aws/data/ec2_shapes.csv) also takes every EFA interface of its node.
    interfaces = efa.efa_interfaces(instance_type, True)
    assert (
        worker["resources"]["requests"]
        == worker["resources"]["limits"]
        == {
            "cpu": "3",
            "memory": "12Gi",
            gpu.GPU_RESOURCE: str(gpus),
            **({efa.EFA_RESOURCE: str(interfaces)} if interfaces else {}),
        }
    )
    assert pod["tolerations"] == [
        {"key": gpu.GPU_TAINT_KEY, "operator": "Equal", "value": gpu.GPU_TAINT_VALUE, "effect": gpu.GPU_TAINT_EFFECT}
    ]


def test_a_cpu_worker_asks_for_no_gpu_and_tolerates_only_the_worker_pool_taint():
    pod = workloads.elastic_job(settings(**DISTINCT), IMAGE, "--rdzv_id=x")["spec"]["replicaSpecs"]["Worker"][
        "template"
    ]["spec"]
    (worker,) = pod["containers"]
    assert set(worker["resources"]["requests"]) == set(worker["resources"]["limits"]) == {"cpu", "memory"}
    assert pod["tolerations"] == [
        {"key": "elastic-training/workers", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    "memory, shm",
    [
        ("12Gi", "6144Mi"),
        ("16Gi", "8192Mi"),
        ("16386Mi", "8192Mi"),
        ("16382Mi", "8191Mi"),
        ("4097Mi", "2048Mi"),
        ("64Gi", "8192Mi"),
    ],
)
def test_gpu_shared_memory_is_half_the_worker_memory_up_to_8_gib(memory, shm):
    """Whole MiB, rounded down: exactly half at 16 GiB reaches the cap, one MiB less stays under it."""
    gpu_settings = settings(nodeInstanceType="g6.12xlarge", workerMemory=memory, workerCpu="3")
    assert workloads.shm_size_limit(gpu_settings) == shm
    volumes = workloads.elastic_job(gpu_settings, IMAGE, "--rdzv_id=x")["spec"]["replicaSpecs"]["Worker"]["template"][
        "spec"
    ]["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}} in volumes
    # On CPU nodes the cap is fixed, whatever the memory (64Gi does not fit dev's c5.4xlarge: m5.16xlarge
    # is in no table of infra/aws/, so its fit is not checked).
    cpu_settings = settings(
        workerMemory=memory, workerCpu="1", nodeInstanceType="c5.4xlarge" if memory != "64Gi" else "m5.16xlarge"
    )
    assert workloads.shm_size_limit(cpu_settings) == workloads.SHM_SIZE_LIMIT == "8Gi"


def test_the_device_plugin_runs_on_gpu_nodes_only_and_its_policy_guards_exactly_its_pods():
    from infra.specs import gpu

    plugin = gpu.device_plugin_daemonset()
    template = plugin["spec"]["template"]
    assert plugin["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert template["spec"]["nodeSelector"].items() <= gpu.gpu_node_labels().items()
    assert template["spec"]["tolerations"] == [gpu.gpu_toleration()]
    assert not template["spec"]["nodeSelector"].items() <= gpu.system_node_labels().items()
    policy = gpu.device_plugin_network_policy()
    assert policy["metadata"]["namespace"] == plugin["metadata"]["namespace"] == gpu.DEVICE_PLUGIN_NAMESPACE
    # Exactly the plugin's pods (not the rest of kube-system), and no ingress rule at all.
    assert policy["spec"] == {
        "podSelector": {"matchLabels": plugin["spec"]["selector"]["matchLabels"]},
        "policyTypes": ["Ingress"],
    }


# --- the export Job: this run's files to the given destination, as the export identity ----------------


def test_the_export_job_sends_this_runs_files_to_the_destination_as_the_export_account():
    s = settings(**DISTINCT)
    job = workloads.export_job(s, IMAGE, "s3://artifacts/runs/r-8")
    assert job["metadata"]["name"] == workloads.names("r-8").export == "export-r-8"
    assert job["metadata"]["namespace"] == "ml" and job["spec"]["backoffLimit"] == 2
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "jobs.results.export"]
    assert container["args"] == ["--run-dir", "/efs-shared/runs/r-8", "--dest", "s3://artifacts/runs/r-8"]
    assert container["image"] == IMAGE and {"name": "AWS_REGION", "value": "eu-west-1"} in container["env"]
    account = workloads.export_service_account(s, "arn:aws:iam::123456789012:role/export")
    assert pod["serviceAccountName"] == account["metadata"]["name"] == workloads.EXPORT_SERVICE_ACCOUNT
    assert account["metadata"]["namespace"] == "ml"
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == "arn:aws:iam::123456789012:role/export"


# --- a claim from the cluster's own provisioner (target existing) --------------------------------------


@pytest.mark.parametrize("mode", ["ReadWriteOnce", "ReadWriteMany"])
def test_a_provisioned_claim_asks_the_named_class_for_the_named_mode_and_binds_no_volume_of_ours(mode):
    from infra.specs import storage

    claim = storage.provisioned_claim("claim", "ml", "standard", mode)
    assert claim["metadata"]["name"] == "claim" and claim["metadata"]["namespace"] == "ml"
    assert claim["spec"] == {
        "accessModes": [mode],
        "storageClassName": "standard",
        "resources": {"requests": {"storage": storage.PROVISIONED_CAPACITY}},
    }
    assert claim["apiVersion"] == "v1" and claim["kind"] == "PersistentVolumeClaim"


# --- an imageUri pinned by a tag: its own pull policy and its two suppression rows, nowhere else ---------


@pytest.mark.parametrize(
    "uri, policy",
    [
        ("registry.example/trainer:1.0", "IfNotPresent"),
        ("registry.example/trainer:latest", "Always"),
        ("registry.example/trainer", "Always"),
        ("registry.example/trainer@sha256:" + "1" * 64, "IfNotPresent"),
    ],
)
def test_an_image_uri_gets_the_pull_policy_its_reference_calls_for(uri, policy):
    # The spec builder's rule for any reference; which ones config lets through per target is
    # tests/config's concern (target eks takes digests only).
    s = dataclasses.replace(settings(), image_uri=uri)
    assert workloads.pull_policy(s) == policy
    (container,) = workloads.test_job(s, uri)["spec"]["template"]["spec"]["containers"]
    assert container["imagePullPolicy"] == policy
    assert workloads.pull_policy(settings()) == "IfNotPresent"  # the built image, by digest


def _skips(obj) -> list[tuple[str, str]]:
    annotations = obj["metadata"].get("annotations", {})
    found = [
        tuple(annotations[f"checkov.io/skip{i}"].split("=", 1))
        for i in range(1, len(annotations) + 1)
        if f"checkov.io/skip{i}" in annotations
    ]
    assert len(found) == len([k for k in annotations if k.startswith("checkov.io/skip")])
    return found


def test_jobs_of_a_tag_pinned_image_uri_carry_the_two_rows_even_while_the_image_is_an_output():
    from infra.specs import suppressions

    class Unresolved:  # a pulumi Output: its text is not known while the spec is built
        pass

    tagged, digest = dataclasses.replace(settings(), image_uri="registry.example/trainer:1.0"), settings(imageUri=IMAGE)
    for build in (workloads.data_prep_job, workloads.test_job):
        assert _skips(build(tagged, Unresolved())) == suppressions.TAG_PINNED_IMAGE
        assert _skips(build(tagged, "registry.example/trainer:1.0")) == suppressions.TAG_PINNED_IMAGE  # once, not twice
        assert _skips(build(digest, IMAGE)) == []
        assert _skips(build(settings(), Unresolved())) == []


def test_the_images_of_every_pod_carrying_shape_are_found():
    from infra.specs import suppressions

    def pod(*images):
        return {"spec": {"containers": [{"name": str(i), "image": image} for i, image in enumerate(images)]}}

    assert suppressions._images({"kind": "Job", "spec": {"template": pod("a", "b")}}) == ["a", "b"]
    assert suppressions._images(
        {"kind": "ElasticJob", "spec": {"replicaSpecs": {"Worker": {"template": pod("w")}}}}
    ) == ["w"]
    for empty in (
        {},
        {"spec": None},
        {"spec": {}},
        {"spec": {"template": None}},
        {"spec": {"template": {"spec": None}}},
        {"spec": {"template": {"spec": {"containers": None}}}},
        {"spec": {"replicaSpecs": None}},
        {"spec": {"replicaSpecs": {"Worker": None}}},
        {"spec": {"replicaSpecs": {"Launcher": {"template": pod("l")}}}},
    ):
        assert suppressions._images(empty) == [], empty
    assert suppressions._images({"spec": {"template": pod()}}) == []


def test_tag_rows_go_to_our_jobs_only_are_added_after_an_objects_own_rows_and_never_share_the_table():
    from infra.specs import suppressions

    def obj(kind, component, image):
        return {
            "kind": kind,
            "metadata": {"labels": {"app.kubernetes.io/component": component}},
            "spec": {"template": {"spec": {"containers": [{"image": image}]}}},
        }

    tag = "registry.example/trainer:1.0"
    for kind, component in suppressions.IMAGE_COMPONENTS - {suppressions.CONTROLLER}:
        found = suppressions.suppressions_for(obj(kind, component, tag))
        assert found == suppressions.TAG_PINNED_IMAGE and found is not suppressions.TAG_PINNED_IMAGE
        assert suppressions.suppressions_for(obj(kind, component, IMAGE)) == []
        assert suppressions.suppressions_for(obj("CronJob", component, tag)) == []
    assert suppressions.suppressions_for(obj("Job", "export", tag)) == []
    assert suppressions.suppressions_for(obj("Job", "training", tag)) == []
    # the controller runs the training image: its own rows, then the tag rows when imageUri names a tag
    controller = obj(*suppressions.CONTROLLER, tag)
    rows = suppressions.SUPPRESSIONS[suppressions.CONTROLLER]
    assert suppressions.suppressions_for(controller) == rows + suppressions.TAG_PINNED_IMAGE
    assert suppressions.suppressions_for(obj(*suppressions.CONTROLLER, IMAGE)) == rows
    assert _skips(suppressions.annotate(controller, image_by_tag=True)) == rows + suppressions.TAG_PINNED_IMAGE
    assert len(suppressions.TAG_PINNED_IMAGE) == 2 and suppressions.SUPPRESSIONS[suppressions.CONTROLLER] == rows
