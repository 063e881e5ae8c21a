"""etcd, the rendezvous store, survives what a node survives (issue 22): its data on a claim that
outlives the pod (EBS gp3 through the EBS CSI add-on on eks; the cluster's storageClassName on an
existing cluster), its own priority, a disruption budget, Recreate, fast probes. Strict validity
of the objects: test_manifests_valid.py; the reviewed whole: tests/golden/platform-objects.yaml."""

from __future__ import annotations

import json

from infra import versions
from infra.specs import elastic, rendezvous_store


def _etcd(namespace: str = "ml", storage_class: str = "gp3") -> dict[str, dict]:
    return {obj["kind"]: obj for obj in elastic.etcd_objects(namespace, storage_class)}


def test_etcd_keeps_its_data_on_the_claim_it_comes_with():
    objects = _etcd()
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    claim = objects["PersistentVolumeClaim"]
    (volume,) = pod["volumes"]
    assert volume == {"name": "data", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                             "resources": {"requests": {"storage": "1Gi"}}}
    (container,) = pod["containers"]
    (mount,) = container["volumeMounts"]
    data_dir = next(a for a in container["args"] if a.startswith("--data-dir="))
    # a directory of its own inside the mount (etcd wants 0700; the mount's root is the fsGroup's)
    assert data_dir == f"--data-dir={mount['mountPath']}/data" and mount["name"] == "data"
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"] == elastic.NONROOT_UID
    # the old pod lets go of the volume before the new one mounts it
    assert objects["Deployment"]["spec"]["strategy"] == {"type": "Recreate"}
    # off a dead node in 30 s (not the admission default of 300 s), so its volume can follow in time
    assert sorted((t["key"], t["effect"], t["tolerationSeconds"]) for t in pod["tolerations"]) == [
        ("node.kubernetes.io/not-ready", "NoExecute", 30), ("node.kubernetes.io/unreachable", "NoExecute", 30)]


def test_etcd_runs_above_the_workloads_with_a_class_of_its_own():
    pod = _etcd()["Deployment"]["spec"]["template"]["spec"]
    klass = rendezvous_store.priority_class()
    assert pod["priorityClassName"] == klass["metadata"]["name"] == "elastic-training-rendezvous"
    # not system-cluster-critical (kube-system only); user classes stop at one billion
    assert 0 < klass["value"] <= 1_000_000_000 and klass.get("globalDefault", False) is False
    assert klass["preemptionPolicy"] == "PreemptLowerPriority"


def test_the_budget_holds_etcd_and_nothing_else():
    objects = _etcd()
    budget = objects["PodDisruptionBudget"]
    template_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    selector = budget["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template_labels.items()
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"  # a broken etcd may still go
    for other in elastic.controller_objects("ml", "image@sha256:" + "0" * 64, "efs-pvc"):
        if other["kind"] == "Deployment":
            assert not selector.items() <= other["spec"]["template"]["metadata"]["labels"].items()
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"ml"}


def test_probes_make_a_new_etcd_ready_within_seconds():
    (container,) = _etcd()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["startupProbe"]["periodSeconds"] == 1
    assert container["readinessProbe"]["periodSeconds"] <= 2
    # liveness only after startup: a slow first start is not killed
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] >= 60


def test_eks_gives_etcd_an_encrypted_gp3_volume_through_the_ebs_csi_add_on(dev):
    claim = dev.manifest("PersistentVolumeClaim", "etcd-")
    klass = dev.manifest("StorageClass", "etcd-")
    assert claim["spec"]["storageClassName"] == klass["metadata"]["name"]
    assert klass["provisioner"] == "ebs.csi.aws.com" and klass["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert klass["volumeBindingMode"] == "WaitForFirstConsumer" and klass["reclaimPolicy"] == "Delete"

    addon = dev.one("aws:eks/addon:Addon", "rendezvous-ebs-csi-driver")
    assert addon["inputs"]["addonName"] == "aws-ebs-csi-driver"
    assert addon["inputs"]["addonVersion"] == versions.EBS_CSI_ADDON_VERSION  # synth's offline placeholder
    role = dev.one("aws:iam/role:Role", "rendezvous-ebs-csi-role")
    (statement,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    (subject,) = statement["Condition"]["StringLike"].values()
    assert subject == "system:serviceaccount:kube-system:ebs-csi-controller-sa"
    policy = dev.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "rendezvous-ebs-csi-policy")
    assert policy["inputs"]["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"

    # order: the driver, then the class, then the claim, then etcd (with its priority class)
    klass_resource = dev.one("kubernetes:storage.k8s.io/v1:StorageClass", "rendezvous-sc")
    claim_resource = dev.one("kubernetes:core/v1:PersistentVolumeClaim", "elastic-etcd-persistentvolumeclaim")
    etcd = dev.one("kubernetes:apps/v1:Deployment", "elastic-etcd-deployment")
    assert addon["urn"] in klass_resource["dependsOn"]
    assert klass_resource["urn"] in claim_resource["dependsOn"]
    assert claim_resource["urn"] in etcd["dependsOn"]
    assert dev.one("kubernetes:scheduling.k8s.io/v1:PriorityClass")["urn"] in etcd["dependsOn"]
    # the budget would fail a node-group update after 15 minutes; forced, the update moves etcd last
    assert dev.one("eks:index:ManagedNodeGroup")["inputs"]["forceUpdateVersion"] is True


def test_an_existing_cluster_gives_etcd_a_claim_of_its_storage_class(synth_stack):
    local = synth_stack("local")
    claim = local.manifest("PersistentVolumeClaim", "etcd-")
    assert claim["spec"]["storageClassName"] == "standard"  # Pulumi.local.yaml's storageClassName (kind)
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert [m["metadata"]["name"] for m in local.manifests if m["kind"] == "StorageClass"] == []
    assert not local.of_type("aws:eks/addon:Addon")
    assert local.manifest("PriorityClass")["metadata"]["name"] == rendezvous_store.PRIORITY_CLASS
