"""The platform's real properties, read from what the program registered (resources.json)."""

from __future__ import annotations

import ipaddress
import json
import re

from infra import versions
from infra.cli.mocks import short_hash
from infra.components.network import subnet_cidrs


def test_network_has_a_public_and_private_subnet_per_zone(dev, variant):
    vpc = dev.one("aws:ec2/vpc:Vpc")
    assert vpc["inputs"]["enableDnsHostnames"] is True and vpc["inputs"]["enableDnsSupport"] is True
    subnets = dev.of_type("aws:ec2/subnet:Subnet")
    private = [s for s in subnets if "-private-" in s["name"]]
    public = [s for s in subnets if "-public-" in s["name"]]
    assert len(private) == len(public) == 2
    assert {s["inputs"]["availabilityZone"] for s in private} == {"us-west-2a", "us-west-2b"}
    assert all(s["inputs"]["tags"]["kubernetes.io/role/internal-elb"] == "1" for s in private)
    assert all(s["inputs"]["mapPublicIpOnLaunch"] is False for s in public)
    nat = dev.one("aws:ec2/natGateway:NatGateway")
    private_routes = dev.one("aws:ec2/routeTable:RouteTable", "network-private-rt")["inputs"]["routes"]
    assert private_routes == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": private_routes[0]["natGatewayId"]}]
    assert nat["urn"] in dev.one("aws:ec2/routeTable:RouteTable", "network-private-rt")["dependsOn"]
    assert len(variant.of_type("aws:ec2/subnet:Subnet")) == 6
    assert len(variant.of_type("aws:efs/mountTarget:MountTarget")) == 3
    assert {s["inputs"]["availabilityZone"] for s in variant.of_type("aws:ec2/subnet:Subnet")} == {
        "eu-west-1a",
        "eu-west-1b",
        "eu-west-1c",
    }


def test_subnet_cidrs_do_not_overlap():
    private, public = subnet_cidrs(4)
    networks = [ipaddress.ip_network(c) for c in private + public]
    assert all(not a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1 :])
    assert all(n.subnet_of(ipaddress.ip_network("10.0.0.0/16")) for n in networks)


def test_cluster_settings(dev):
    cluster = dev.one("eks:index:Cluster")["inputs"]
    assert cluster["version"] == versions.DEFAULT_KUBERNETES_VERSION
    assert cluster["authenticationMode"] == "API"
    assert cluster["createOidcProvider"] is True
    assert cluster["skipDefaultNodeGroup"] is True and cluster["skipDefaultSecurityGroups"] is True
    assert cluster["nodeAssociatePublicIpAddress"] is False
    assert cluster["endpointPrivateAccess"] is True and cluster["endpointPublicAccess"] is True
    assert cluster["publicAccessCidrs"] == ["0.0.0.0/0"]
    assert set(cluster["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    key = dev.one("aws:kms/key:Key")
    assert key["inputs"]["enableKeyRotation"] is True
    assert cluster["encryptionConfigKeyArn"].startswith("arn:aws:kms:us-west-2:")
    private_ids = {s["urn"] for s in dev.of_type("aws:ec2/subnet:Subnet") if "-private-" in s["name"]}
    assert private_ids <= set(dev.one("eks:index:Cluster")["dependsOn"])
    assert len(cluster["privateSubnetIds"]) == 2 and len(cluster["publicSubnetIds"]) == 2


def test_cluster_service_role_may_use_only_its_key(dev):
    policy = json.loads(dev.one("aws:iam/rolePolicy:RolePolicy", "cluster-service-kms")["inputs"]["policy"])
    (statement,) = policy["Statement"]
    assert statement["Resource"] == dev.one("eks:index:Cluster")["inputs"]["encryptionConfigKeyArn"]
    assert set(statement["Action"]) == {"kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"}


def test_managed_nodes_in_private_subnets(dev, variant):
    """One managed group, the on-demand system group; workers come from Karpenter (tests/test_worker_capacity.py)."""
    nodes = dev.one("eks:index:ManagedNodeGroup")
    inputs = nodes["inputs"]
    assert inputs["instanceTypes"] == ["m5.large"] and inputs["capacityType"] == "ON_DEMAND"
    assert inputs["scalingConfig"] == {"desiredSize": 2, "minSize": 2, "maxSize": 2}
    # the root volume's size is in the launch template (tests/components/test_node_launch_template.py)
    assert "diskSize" not in inputs and inputs["amiType"] == versions.NODE_AMI_TYPE
    assert inputs["cluster"] == dev.one("eks:index:Cluster")["urn"]
    assert inputs["subnetIds"] == dev.one("eks:index:Cluster")["inputs"]["privateSubnetIds"]
    attachments = {
        r["inputs"]["policyArn"].rsplit("/", 1)[1]
        for r in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r["name"].startswith("cluster-node-")
    }
    assert attachments == {"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"}
    assert "accessEntries" not in dev.one("eks:index:Cluster")["inputs"]
    assert variant.one("eks:index:ManagedNodeGroup")["inputs"]["scalingConfig"]["desiredSize"] == 2
    entries = variant.one("eks:index:Cluster")["inputs"]["accessEntries"]
    assert entries["admin-0"]["principalArn"] == "arn:aws:iam::123456789012:role/platform-admins"
    assert entries["admin-0"]["accessPolicies"]["cluster-admin"]["policyArn"].endswith("/AmazonEKSClusterAdminPolicy")


def test_efs_encrypted_and_nfs_only_from_the_node_security_group(dev):
    efs = dev.one("aws:efs/fileSystem:FileSystem")["inputs"]
    assert efs["encrypted"] is True
    rule = dev.one("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")["inputs"]
    assert (rule["ipProtocol"], rule["fromPort"], rule["toPort"]) == ("tcp", 2049, 2049)
    # the mocks answer pulumi-eks's nodeSecurityGroupId output with this id for "cluster-eks"
    assert rule["referencedSecurityGroupId"] == f"sg-{short_hash('cluster-eks/cluster', 17)}"
    assert "cidrIpv4" not in rule and "cidrIpv6" not in rule
    # exactly one ingress rule on the NFS group, and none inline
    assert len(dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")) == 1
    assert "ingress" not in dev.one("aws:ec2/securityGroup:SecurityGroup")["inputs"]
    assert (
        dev.one("eks:index:Cluster")["urn"]
        in dev.one("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")["dependsOn"]
    )


def test_one_mount_target_per_private_subnet(dev):
    private = {s["urn"] for s in dev.of_type("aws:ec2/subnet:Subnet") if "-private-" in s["name"]}
    targets = dev.of_type("aws:efs/mountTarget:MountTarget")
    assert len(targets) == len(private) == 2
    assert {u for t in targets for u in t["dependsOn"] if u in private} == private
    nfs_group = dev.one("aws:ec2/securityGroup:SecurityGroup")["urn"]
    assert all(nfs_group in t["dependsOn"] for t in targets)


def test_efs_access_point_owned_by_the_image_user(dev):
    ap = dev.one("aws:efs/accessPoint:AccessPoint")["inputs"]
    assert ap["posixUser"] == {"uid": 1000, "gid": 1000}
    assert ap["rootDirectory"]["creationInfo"] == {"ownerUid": 1000, "ownerGid": 1000, "permissions": "0750"}


def test_efs_csi_driver_addon_with_irsa_scoped_to_its_service_accounts(dev):
    addon = dev.one("aws:eks/addon:Addon", "storage-efs-csi-driver")
    assert addon["inputs"]["addonName"] == "aws-efs-csi-driver"
    assert addon["inputs"]["addonVersion"] == versions.EFS_CSI_ADDON_VERSION
    assert dev.one("eks:index:ManagedNodeGroup")["urn"] in addon["dependsOn"]
    role = dev.one("aws:iam/role:Role", "storage-efs-csi-role")
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"].startswith(
        "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/"
    )
    issuer = statement["Principal"]["Federated"].split("oidc-provider/")[1]
    assert statement["Condition"]["StringLike"] == {f"{issuer}:sub": "system:serviceaccount:kube-system:efs-csi-*"}
    assert statement["Condition"]["StringEquals"] == {f"{issuer}:aud": "sts.amazonaws.com"}
    attachment = dev.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "storage-efs-csi-policy")["inputs"]
    assert attachment["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
    assert addon["inputs"]["serviceAccountRoleArn"].endswith(f":role/{attachment['role']}")


def test_metrics_server_is_the_pinned_community_addon(dev):
    addon = dev.one("aws:eks/addon:Addon", "addons-metrics-server")["inputs"]
    assert addon["addonName"] == "metrics-server" and addon["addonVersion"] == versions.METRICS_SERVER_ADDON_VERSION


def test_pv_and_pvc_bind_the_efs_access_point_read_write_many(dev):
    pv = dev.manifest("PersistentVolume")
    pvc = dev.manifest("PersistentVolumeClaim", "efs-")
    sc = dev.manifest("StorageClass", "efs-")
    fs_id = dev.outputs["efsFileSystemId"]
    assert sc["metadata"]["name"] == "efs-sc" and sc["provisioner"] == "efs.csi.aws.com"
    assert pv["metadata"]["name"] == "efs-pv"
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"] and pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["csi"]["driver"] == "efs.csi.aws.com"
    assert pv["spec"]["csi"]["volumeHandle"].startswith(f"{fs_id}::fsap-")
    assert pv["spec"]["storageClassName"] == "efs-sc"
    assert pvc["metadata"] == {**pvc["metadata"], "name": "efs-pvc", "namespace": "training"}
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["volumeName"] == "efs-pv" and pvc["spec"]["storageClassName"] == "efs-sc"
    pv_resource = dev.one("kubernetes:core/v1:PersistentVolume")
    assert {t["urn"] for t in dev.of_type("aws:efs/mountTarget:MountTarget")} <= set(pv_resource["dependsOn"])
    assert pv_resource["urn"] in dev.one("kubernetes:core/v1:PersistentVolumeClaim", "storage-pvc")["dependsOn"]


def test_storage_names_come_from_config(variant):
    synth = variant
    pvc = synth.manifest("PersistentVolumeClaim", "shared-")
    assert (pvc["metadata"]["name"], pvc["metadata"]["namespace"]) == ("shared-claim", "ml")
    assert pvc["spec"]["volumeName"] == "shared-pv" and pvc["spec"]["storageClassName"] == "shared"
    assert synth.manifest("Job", "prep-")["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "shared-claim"
    }


def test_ecr_repository(dev):
    repo = dev.one("aws:ecr/repository:Repository")["inputs"]
    assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
    # Immutable except the content tags a rebuild pushes again (tests/components/test_ecr_tag_rule.py).
    assert repo["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
    assert repo["imageTagMutabilityExclusionFilters"] == [{"filter": "src-*", "filterType": "WILDCARD"}]
    assert repo["forceDelete"] is True
    policy = json.loads(dev.one("aws:ecr/lifecyclePolicy:LifecyclePolicy")["inputs"]["policy"])
    assert [rule["selection"]["tagStatus"] for rule in policy["rules"]] == ["untagged", "any"]


def test_image_built_from_images_and_pushed(dev):
    image = dev.one("docker-build:index:Image")["inputs"]
    repo_url = dev.outputs["repositoryUrl"]
    assert image["push"] is True
    assert image["dockerfile"]["location"] == "images/Dockerfile"  # relative: tests/components/test_image_inputs.py
    assert image["platforms"] == [versions.IMAGE_PLATFORM]
    (tag,) = image["tags"]
    assert re.fullmatch(re.escape(repo_url) + r":src-[0-9a-f]{16}-cpu", tag)
    assert image["registries"][0]["address"] == repo_url and image["registries"][0]["username"] == "AWS"


def test_image_uri_skips_the_build(variant):
    uri = "public.ecr.aws/example/trainer@sha256:" + "a" * 64
    synth = variant
    assert synth.of_type("docker-build:index:Image") == []
    assert synth.outputs["imageRef"] == uri
    for kind in ("Job", "ElasticJob"):
        for obj in [m for m in synth.manifests if m["kind"] == kind]:
            pod = obj["spec"]["template"] if kind == "Job" else obj["spec"]["replicaSpecs"]["Worker"]["template"]
            assert pod["spec"]["containers"][0]["image"] == uri
