"""Item 7 of issue 14: AWS details a real account shows and the mocks used to hide.

Upstream behaviour modelled here, with its source:
- zones: EC2 DescribeAvailabilityZones returns opted-in Local and Wavelength Zones too, and the
  filter opt-in-status=opt-in-not-required keeps the regular zones only (upstream-facts.md fact 13;
  pulumi-aws 7.51.1 get_availability_zones docs); the provider sorts by name and returns names and
  zoneIds in parallel (hashicorp/terraform-provider-aws
  internal/service/ec2/ec2_availability_zones_data_source.go @ 0a55e18a); EKS refuses cluster
  subnets in use1-az3, usw1-az2 and cac1-az3 (awsdocs/amazon-eks-user-guide
  latest/ug/networking/network-reqs.adoc @ f6004140). The mocks (infra/cli/mocks.py) answer the invoke
  that way, with a Local Zone, a Wavelength Zone and use1-az3 in us-east-1.
- control-plane logs: EKS writes to /aws/eks/<cluster>/cluster and creates that group, with no
  retention, if it does not exist (fact 14); terraform-aws-modules/terraform-aws-eks main.tf
  @ bef29c4d creates it first (`aws_cloudwatch_log_group.this`, in the cluster's depends_on).
  Retention values: botocore's logs service model, shape `Days` (PutRetentionPolicy), read here.
- the cluster creator's access: pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts @ 7bf0c1b1 sets
  bootstrapClusterCreatorAdminPermissions: true (fact 12); STS assumed-role ARNs carry the role name
  without its path; IAM names are unique per account and case-insensitive (botocore iam model,
  CreateRole RoleName).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import botocore
import pytest

from infra.aws import zones
from infra.config import CLOUDWATCH_LOG_RETENTION_DAYS, PROJECT
from infra.cli.mocks import ACCOUNT_ID, DEPLOYER_ROLE, DEPLOYER_SESSION_ARN, describe_availability_zones, zones_of
from infra.aws.principals import drop_creator, iam_arn, principal_of


# --- zones ---------------------------------------------------------------------------------------


def test_the_mocks_answer_like_an_account_with_local_and_wavelength_zones():
    us_east_1 = zones_of("us-east-1")
    assert {z.opt_in_status for z in us_east_1} == {"opt-in-not-required", "opted-in"}
    assert any("-wl1-" in z.name for z in us_east_1) and any(
        re.fullmatch(r"us-east-1-[a-z]+-1a", z.name) for z in us_east_1
    )
    assert "use1-az3" in {z.zone_id for z in us_east_1}
    unfiltered = describe_availability_zones("us-east-1", {"state": "available"})
    # without the filter, a Local Zone sorts first (fact 13)
    assert unfiltered["names"][0] == "us-east-1-bos-1a"
    assert len(unfiltered["names"]) == len(unfiltered["zoneIds"]) == 8


def test_zone_choice_skips_local_wavelength_and_refused_zones():
    answer = describe_availability_zones(
        "us-east-1",
        {
            "state": "available",
            "filters": [{"name": zones.ONLY_AVAILABILITY_ZONES.name, "values": zones.ONLY_AVAILABILITY_ZONES.values}],
        },
    )
    assert answer["names"] == [f"us-east-1{letter}" for letter in "abcdef"]
    usable = zones.usable_zone_names(answer["names"], answer["zoneIds"])
    assert usable == [f"us-east-1{letter}" for letter in "bcdef"]  # us-east-1a is use1-az3 in this account
    assert zones.EKS_REFUSED_ZONE_IDS == {"use1-az3", "usw1-az2", "cac1-az3"}


def test_smoke_in_us_east_1_gets_subnets_only_in_zones_eks_accepts(synth_stack):
    smoke = synth_stack("smoke")
    subnet_zones = {s["inputs"]["availabilityZone"] for s in smoke.of_type("aws:ec2/subnet:Subnet")}
    assert subnet_zones == {"us-east-1b", "us-east-1c"}
    refused = {
        z.name
        for z in zones_of("us-east-1")
        if z.zone_id in zones.EKS_REFUSED_ZONE_IDS or z.opt_in_status != "opt-in-not-required"
    }
    assert refused == {"us-east-1a", "us-east-1-bos-1a", "us-east-1-wl1-bos-wlz-1"} and not subnet_zones & refused


def test_dev_in_us_west_2_skips_the_los_angeles_local_zone(dev):
    assert {s["inputs"]["availabilityZone"] for s in dev.of_type("aws:ec2/subnet:Subnet")} == {
        "us-west-2a",
        "us-west-2b",
    }


# --- Deployments wait for the nodes ------------------------------------------------------------------


def test_controller_and_store_deployments_depend_on_the_node_group(dev):
    nodes = dev.one("eks:index:ManagedNodeGroup")["urn"]
    deployments = [*dev.of_type("kubernetes:apps/v1:Deployment"), *dev.of_type("kubernetes:apps/v1:StatefulSet")]
    assert sorted((d["type"].rsplit(":", 1)[1], d["inputs"]["metadata"]["name"]) for d in deployments) == [
        ("Deployment", "elasticjob-controller"),
        ("StatefulSet", "rendezvous-store"),
    ]
    for deployment in deployments:
        assert nodes in deployment["dependsOn"], deployment["name"]


# --- control-plane log group -------------------------------------------------------------------------


def test_the_stack_creates_the_control_plane_log_group_before_the_cluster(dev):
    cluster = dev.one("eks:index:Cluster")
    group = dev.one("aws:cloudwatch/logGroup:LogGroup")
    assert cluster["inputs"]["name"] == "elastic-training-dev"
    assert group["inputs"]["name"] == f"/aws/eks/{cluster['inputs']['name']}/cluster"
    assert group["inputs"]["retentionInDays"] == 30
    assert group["urn"] in cluster["dependsOn"]
    assert group["retainOnDelete"] is False and group["protect"] is False
    assert dev.outputs["clusterName"] == cluster["inputs"]["name"]


def test_allowed_retentions_are_the_ones_cloudwatch_logs_accepts():
    model = json.loads(gzip.open(Path(botocore.__file__).parent / "data/logs/2014-03-28/service-2.json.gz").read())
    documentation = model["shapes"]["Days"]["documentation"]
    listed = re.search(r"Possible values are: ([0-9, and]+)\.", documentation)[1]
    assert tuple(int(v) for v in re.findall(r"[0-9]+", listed)) == CLOUDWATCH_LOG_RETENTION_DAYS


# --- the cluster creator's own ARN in clusterAdminArns --------------------------------------------------------


@pytest.mark.parametrize(
    "arn, same",
    [
        (f"arn:aws:iam::{ACCOUNT_ID}:role/{DEPLOYER_ROLE}", True),
        (f"arn:aws:iam::{ACCOUNT_ID}:role/teams/ml/{DEPLOYER_ROLE}", True),  # the session ARN drops the path
        (f"arn:aws:iam::{ACCOUNT_ID}:role/{DEPLOYER_ROLE.upper()}", True),  # IAM names ignore case
        (f"arn:aws:iam::{ACCOUNT_ID}:role/{DEPLOYER_ROLE}-readonly", False),
        (f"arn:aws:iam::210987654321:role/{DEPLOYER_ROLE}", False),  # another account
        (f"arn:aws:iam::{ACCOUNT_ID}:user/{DEPLOYER_ROLE}", False),  # a user is not the role
    ],
)
def test_an_assumed_role_session_is_compared_as_its_role(arn, same):
    kept, warnings = drop_creator([arn], DEPLOYER_SESSION_ARN)
    assert (kept, len(warnings)) == (([], 1) if same else ([arn], 0))


def test_a_user_caller_matches_its_user_arn_with_or_without_path():
    caller = f"arn:aws:iam::{ACCOUNT_ID}:user/ops/alice"
    assert principal_of(caller) == principal_of(f"arn:aws:iam::{ACCOUNT_ID}:user/alice")
    assert principal_of(f"arn:aws:iam::{ACCOUNT_ID}:root") is None
    assert drop_creator([f"arn:aws:iam::{ACCOUNT_ID}:role/alice"], caller) == (
        [f"arn:aws:iam::{ACCOUNT_ID}:role/alice"],
        [],
    )
    # the creator is recorded as the IAM principal: a session becomes its role, a user stays itself
    assert (
        iam_arn(DEPLOYER_SESSION_ARN) == f"arn:aws:iam::{ACCOUNT_ID}:role/{DEPLOYER_ROLE}" and iam_arn(caller) == caller
    )


def test_synth_drops_the_creator_with_a_warning_and_takes_the_log_retention(tmp_path):
    """One render for two config keys (each render costs seconds)."""
    from synth_support import load_synth, run_synth

    mine = f"arn:aws:iam::{ACCOUNT_ID}:role/platform/{DEPLOYER_ROLE}"
    other = f"arn:aws:iam::{ACCOUNT_ID}:role/platform-admins"
    result = run_synth(tmp_path / "out", "dev", f'clusterAdminArns={json.dumps([mine, other])}', "logRetentionDays=365")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "clusterAdminArns lists" in line]
    # no cluster yet: the deployer creates it, so it is the creator (its role, from the session ARN)
    assert warnings == [
        f"warning: config {PROJECT}:clusterAdminArns lists {mine}, the cluster's creator "
        f"(arn:aws:iam::{ACCOUNT_ID}:role/{DEPLOYER_ROLE}): EKS gave the creator an access entry of its "
        "own when it created the cluster (pulumi-eks sets bootstrapClusterCreatorAdminPermissions), "
        "so it is not added again"
    ]
    rendered = load_synth(tmp_path / "out")
    entries = rendered.one("eks:index:Cluster")["inputs"]["accessEntries"]
    assert [entry["principalArn"] for entry in entries.values()] == [other]
    assert rendered.one("aws:cloudwatch/logGroup:LogGroup")["inputs"]["retentionInDays"] == 365
