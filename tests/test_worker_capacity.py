"""Worker capacity as the real `synth` renders it: Karpenter's pool, the interruption path, the marks
on the worker pods, and every other pod on the on-demand system group (docs/elastic-capacity.md).

Upstream behaviour modelled, from source:
- the worker pods our ElasticJob controller's Job creates: tests/worker_pods.py (the pod template
  controller/render.py makes, under an index's name; tolerations and nodeSelector among its fields);
- where a pod may land: Kubernetes' toleration matching and nodeSelector (tests/test_gpu_stack.py),
  against the managed node group's labels and the NodePool's template labels and taints;
- what Karpenter reads: the chart's values (aws/karpenter-provider-aws charts/karpenter/values.yaml
  @ 1d927085: settings.clusterName, settings.interruptionQueue, serviceAccount.annotations);
- the EventBridge events: the source and detail-type of each, as Karpenter's CloudFormation template
  (same commit, website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml)
  routes them, and as Karpenter's parsers expect them (pkg/controllers/interruption/messages/ at v1.14.1).
"""

from __future__ import annotations

import json

import pytest

from worker_pods import worker_pod
from test_gpu_stack import WORKERS, can_land_on, node_groups, pod_templates

# Pods of the stack that must run where a preemption cannot reach: everything but the workers (and
# the device plugin, a per-node DaemonSet of the GPU nodes themselves).
PER_WORKER_NODE = {"DaemonSet/nvidia-device-plugin"}


@pytest.fixture(scope="module")
def spot(synth_stack):
    return synth_stack("spot")


def with_kubelet_labels(group: dict) -> dict:
    """A managed group's nodes as the scheduler sees them: also the labels every kubelet sets
    (kubernetes.io/os, kubernetes.io/arch) and the one EKS adds to on-demand groups (EKS user guide,
    managed-node-groups.adoc: eks.amazonaws.com/capacityType: ON_DEMAND)."""
    return {
        **group,
        "labels": {
            **group["labels"],
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "eks.amazonaws.com/capacityType": group["capacityType"],
        },
    }


def node_pool(synth) -> dict:
    (pool,) = [m for m in synth.manifests if m["kind"] == "NodePool"]
    return pool


def requirement(pool: dict, key: str) -> dict:
    (found,) = [r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    return found


def test_the_spot_pool_draws_several_types_of_one_shape_in_every_zone(spot):
    pool = node_pool(spot)
    assert requirement(pool, "karpenter.sh/capacity-type")["values"] == ["spot"]
    assert requirement(pool, "node.kubernetes.io/instance-type")["values"] == [
        "c5.4xlarge",
        "c5a.4xlarge",
        "c5d.4xlarge",
    ]
    subnets = spot.of_type("aws:ec2/subnet:Subnet")
    private_zones = sorted(
        {s["inputs"]["availabilityZone"] for s in subnets if not s["inputs"].get("mapPublicIpOnLaunch")}
    )
    assert requirement(pool, "topology.kubernetes.io/zone")["values"] == private_zones and len(private_zones) >= 2
    # ... and the EC2NodeClass launches into exactly the private subnets, by id.
    (node_class,) = [m for m in spot.manifests if m["kind"] == "EC2NodeClass"]
    assert len(node_class["spec"]["subnetSelectorTerms"]) == len(private_zones)


def test_on_demand_stacks_use_the_same_pool_on_demand(dev):
    assert requirement(node_pool(dev), "karpenter.sh/capacity-type")["values"] == ["on-demand"]


def test_no_worker_node_exists_before_a_run(spot, dev):
    """The only managed node group is the fixed on-demand system group; workers are a NodePool, which
    launches nothing until a worker pod is pending."""
    for synth in (spot, dev):
        groups = synth.of_type("eks:index:ManagedNodeGroup")
        assert [g["name"] for g in groups] == ["cluster-system-nodes"]
        (system,) = groups
        assert system["inputs"]["capacityType"] == "ON_DEMAND"
        assert system["inputs"]["labels"] == {"elastic-training/role": "system"}


@pytest.mark.parametrize("stack", ["spot", "dev", "gpu"])
def test_only_the_workers_can_land_on_worker_nodes_and_everything_else_lands_on_the_system_group(synth_stack, stack):
    synth = synth_stack(stack)
    groups = node_groups(synth)
    pods = pod_templates(synth)
    on_workers = {name for name, pod in pods.items() if can_land_on(pod, groups[WORKERS])}
    assert on_workers - PER_WORKER_NODE == {"ElasticJob/train-run-1"}
    for name, pod in pods.items():
        if name not in on_workers:
            assert can_land_on(pod, with_kubelet_labels(groups["cluster-system-nodes"])), name
    # The worker pods the controller really creates keep the placement and the do-not-disrupt mark.
    job = synth.manifest("ElasticJob")
    pod = worker_pod(job)
    assert pod["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert can_land_on(pod["spec"], groups[WORKERS])
    assert not can_land_on(pod["spec"], groups["cluster-system-nodes"])


def test_the_interruption_path_is_queue_rules_targets_and_permissions(spot):
    (queue,) = spot.of_type("aws:sqs/queue:Queue")
    assert queue["inputs"]["messageRetentionSeconds"] == 300 and queue["inputs"]["sqsManagedSseEnabled"] is True
    (queue_policy,) = spot.of_type("aws:sqs/queuePolicy:QueuePolicy")
    send, deny = json.loads(queue_policy["inputs"]["policy"])["Statement"]
    queue_arn = send["Resource"]
    assert queue_arn.startswith("arn:aws:sqs:us-west-2:") and deny["Resource"] == queue_arn
    assert (
        send["Principal"]["Service"] == ["events.amazonaws.com", "sqs.amazonaws.com"]
        and send["Action"] == "sqs:SendMessage"
    )
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rules = {
        r["name"]: json.loads(r["inputs"]["eventPattern"]) for r in spot.of_type("aws:cloudwatch/eventRule:EventRule")
    }
    assert {(p["source"][0], p["detail-type"][0]) for p in rules.values()} == {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("aws.ec2", "EC2 Instance State-change Notification"),
        ("aws.health", "AWS Health Event"),
    }
    targets = spot.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == len(rules) and {t["inputs"]["arn"] for t in targets} == {queue_arn}
    # The controller reads that queue (and no other), with its own role that only its service account assumes.
    (controller_policy,) = [
        p for p in spot.of_type("aws:iam/rolePolicy:RolePolicy") if p["name"] == "capacity-controller-policy"
    ]
    statements = {s["Sid"]: s for s in json.loads(controller_policy["inputs"]["policy"])["Statement"]}
    assert statements["ReadInterruptions"]["Resource"] == queue_arn
    assert set(statements["ReadInterruptions"]["Action"]) == {
        "sqs:DeleteMessage",
        "sqs:GetQueueUrl",
        "sqs:ReceiveMessage",
    }
    release = controller_release(spot)
    settings = release["inputs"]["values"]["settings"]
    assert settings["clusterName"] == "elastic-training-spot" and queue_arn.endswith(
        ":" + settings["interruptionQueue"]
    )
    (controller_role,) = [r for r in spot.of_type("aws:iam/role:Role") if r["name"] == "capacity-controller-role"]
    role_arn = release["inputs"]["values"]["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"]
    assert role_arn.split("/")[-1].startswith("capacity-controller-role")
    trust = json.loads(controller_role["inputs"]["assumeRolePolicy"])["Statement"][0]
    assert list(trust["Condition"]["StringLike"].values()) == ["system:serviceaccount:kube-system:karpenter"]


def controller_release(synth) -> dict:
    (release,) = [r for r in synth.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "karpenter"]
    return release


def test_karpenter_runs_on_the_on_demand_system_group_at_the_pinned_chart(spot):
    release = controller_release(spot)
    inputs = release["inputs"]
    assert (inputs["chart"], inputs["version"]) == ("oci://public.ecr.aws/karpenter/karpenter", "1.14.1")
    system_nodes = with_kubelet_labels(node_groups(spot)["cluster-system-nodes"])
    assert can_land_on({"nodeSelector": inputs["values"]["nodeSelector"]}, system_nodes)
    assert not can_land_on({"nodeSelector": inputs["values"]["nodeSelector"]}, node_groups(spot)[WORKERS])
    # Karpenter starts only once the system nodes, its permissions and the queue's rules exist.
    depends = " ".join(release["dependsOn"])
    for needed in (
        "cluster-system-nodes",
        "capacity-controller-policy",
        "capacity-node-access",
        "capacity-spot-interruption-to-queue",
    ):
        assert needed in depends, needed


def test_karpenters_crds_come_from_their_own_release_ahead_of_the_controller(spot):
    """Helm installs a chart's crds/ directory on the first install only and never upgrades it, so the
    CRDs come from the separate `karpenter-crd` chart at the controller's version, installed as the
    upgrade guide does (aws/karpenter-provider-aws @ 1d927085, website/content/en/v1.14/upgrading/
    upgrade-guide.md, "CRD Upgrades": `helm upgrade --install karpenter-crd
    oci://public.ecr.aws/karpenter/karpenter-crd --version x.y.z --namespace "${KARPENTER_NAMESPACE}"`;
    the chart's version is the controller's, charts/karpenter-crd/Chart.yaml: 1.14.1). A bump of the
    version then upgrades the NodePool and EC2NodeClass schemas before the new controller reads them."""
    releases = {r["inputs"]["name"]: r for r in spot.of_type("kubernetes:helm.sh/v3:Release")}
    assert set(releases) == {"karpenter-crd", "karpenter"}
    crds, controller = releases["karpenter-crd"], releases["karpenter"]
    assert (crds["inputs"]["chart"], crds["inputs"]["version"], crds["inputs"]["namespace"]) == (
        "oci://public.ecr.aws/karpenter/karpenter-crd",
        controller["inputs"]["version"],
        "kube-system",
    )
    # The controller's chart keeps its own copy in crds/, which Helm would install once and then
    # never touch: skipped, so exactly one release owns the CRDs.
    assert controller["inputs"]["skipCrds"] is True and not crds["inputs"].get("skipCrds")
    assert crds["urn"] in controller["dependsOn"]
    # The pool and its class are created after the controller, and so after their CRDs.
    for manifest_resource in ("capacity-node-class", "capacity-node-pool"):
        (resource,) = [r for r in spot.resources if r["name"] == manifest_resource]
        assert resource["dependsOn"], manifest_resource


def test_the_worker_nodes_join_the_cluster_through_their_own_access_entry(spot):
    (entry,) = spot.of_type("aws:eks/accessEntry:AccessEntry")
    assert entry["inputs"]["type"] == "EC2_LINUX"
    assert entry["inputs"]["principalArn"].split("/")[-1].startswith("capacity-node-role")
    (profile,) = spot.of_type("aws:iam/instanceProfile:InstanceProfile")
    (node_class,) = [m for m in spot.manifests if m["kind"] == "EC2NodeClass"]
    assert node_class["spec"]["instanceProfile"].startswith("capacity-node-profile")
