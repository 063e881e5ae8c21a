"""Preflight checks every node group the stack creates, against the right quota (issue 21 item 11,
upstream-facts-2.md fact 18).

- EC2 is moto's server (instance types and their zone offerings from AWS-derived data: in
  ca-central-1, g6.xlarge is offered in zones a, b and d, c8id.4xlarge in a and d only).
- Service Quotas for ec2 is botocore's Stubber (moto has none, upstream-facts.md fact 19); every
  request and answer is checked against botocore's service-quotas model, and an unexpected call
  fails the check, so a quota asked for by the wrong code shows.
- The quota names are the EC2 User Guide's ("On-Demand Instance quotas": Running On-Demand DL, F,
  G and VT, HPC, High Memory, Inf, P, Standard (A, C, D, H, I, M, R, T, Z), Trn, X instances).
"""

from __future__ import annotations

from datetime import date

import pytest
from botocore.stub import Stubber
from test_preflight import aws_env, moto_url  # noqa: F401  the preflight tests' moto server and environment

from infra.aws import ec2_quotas
from infra.cli.preflight import Preflight, default_client
from infra.config import INSTANCE_TYPE, ConfigError, load_settings
from infra.config.stack_file import apply_overrides, read_stack_file

TODAY = date(2026, 11, 22)
STANDARD = ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances")
G_VT = ("L-DB2E81BA", "Running On-Demand G and VT instances")
GPU = ("nodeInstanceType=g6.xlarge", "workerCpu=3", "workerMemory=12Gi")


def quota(code: str, name: str, value: float) -> dict:
    return {
        "ServiceCode": "ec2",
        "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
        "QuotaArn": f"arn:aws:servicequotas:us-west-2:123456789012:ec2/{code}",
        "QuotaCode": code,
        "QuotaName": name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def preflight_for(*overrides: str, quotas=(), listed=()) -> tuple[Preflight, list[Stubber]]:
    """Preflight of the dev stack with `overrides`; get_service_quota answers `quotas` ((code, name),
    value) in order, list_service_quotas answers the pages in `listed`."""
    settings = load_settings(apply_overrides(read_stack_file("dev"), overrides), "dev", TODAY)
    stubbers: list[Stubber] = []

    def make(service: str, region: str):
        client = default_client(service, region)
        if service != "service-quotas":
            return client
        stubber = Stubber(client)
        for (code, name), value in quotas:
            stubber.add_response(
                "get_service_quota", {"Quota": quota(code, name, value)}, {"ServiceCode": "ec2", "QuotaCode": code}
            )
        for index, page in enumerate(listed):
            token = {"NextToken": f"page-{index + 1}"} if index + 1 < len(listed) else {}
            stubber.add_response(
                "list_service_quotas",
                {"Quotas": page, **token},
                {"ServiceCode": "ec2", **({"NextToken": f"page-{index}"} if index else {})},
            )
        stubber.activate()
        stubbers.append(stubber)
        return client

    return Preflight(settings, make, TODAY), stubbers


def test_the_system_node_type_must_be_offered_in_the_chosen_zones_too(aws_env):
    check, _ = preflight_for("aws:region=ca-central-1", *GPU, "systemNodeInstanceType=c8id.4xlarge")
    assert check.zones_check().status == "pass" and check.zones == ["ca-central-1a", "ca-central-1b"]
    result = check.instance_type()
    assert result.status == "fail"
    assert result.message == (
        "system nodes: c8id.4xlarge is not offered in ca-central-1b; it is offered in ca-central-1a, ca-central-1d"
    )
    assert "systemNodeInstanceType" in result.fix


def test_both_groups_offered_is_one_pass_line(aws_env):
    check, _ = preflight_for(*GPU)
    check.zones_check()
    result = check.instance_type()
    assert (result.status, result.message) == ("pass", "g6.xlarge and m5.large are offered in us-west-2a, us-west-2b")


def test_the_system_nodes_count_against_the_standard_quota(aws_env):
    # gpu nodes: nodeMaxCount 4 x g6.xlarge (4 vCPUs) = 16 of G and VT; system nodes: 2 x m5.large (2 vCPUs) = 4 of Standard
    check, stubbers = preflight_for(*GPU, quotas=[(G_VT, 16.0), (STANDARD, 2.0)])
    result = check.vcpu_quota()
    for stubber in stubbers:
        stubber.assert_no_pending_responses()
    assert result.status == "fail"
    assert "L-DB2E81BA) is 16 vCPUs; nodeMaxCount 4 x 4 vCPUs = 16" in result.message
    assert (
        "system nodes: Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A) is 2 vCPUs; "
        "systemNodeCount 2 x m5.large (2 vCPUs) needs 4" in result.message
    )
    assert "--quota-code L-1216C47A --desired-value 4" in result.fix and "or lower systemNodeCount" in result.fix


@pytest.mark.parametrize(
    "instance_type, family_quota",
    [
        ("inf2.xlarge", "Running On-Demand Inf instances"),
        ("trn1.2xlarge", "Running On-Demand Trn instances"),
        ("dl2q.24xlarge", "Running On-Demand DL instances"),
        ("hpc7a.12xlarge", "Running On-Demand HPC instances"),
    ],
)
def test_inf_trn_dl_hpc_are_checked_against_their_own_quota(aws_env, instance_type, family_quota):
    # The account's list, two pages, the family's quota on the second; its code is whatever the
    # account says (here an obviously made-up one) and is what the message and the fix name.
    listed = [[quota(*STANDARD, 10_000.0), quota(*G_VT, 10_000.0)], [quota("L-0000FA11", family_quota, 10_000.0)]]
    # The system nodes (m5.large) count against the Standard quota, asked by its code first.
    check, stubbers = preflight_for(
        f"nodeInstanceType={instance_type}",
        "workerCpu=3",
        "workerMemory=12Gi",
        quotas=[(STANDARD, 10_000.0)],
        listed=listed,
    )
    result = check.vcpu_quota()
    for stubber in stubbers:
        stubber.assert_no_pending_responses()  # both pages read, no get_service_quota by a guessed code
    assert result.status == "pass", result.message
    assert f"{family_quota} (L-0000FA11) is 10000 vCPUs; nodeMaxCount 4 x " in result.message
    assert result.message.startswith("system nodes: Running On-Demand Standard")


def test_a_quota_the_account_does_not_list_is_a_warning_not_a_guess(aws_env):
    check, _ = preflight_for(
        "nodeInstanceType=inf2.xlarge", "workerCpu=3", "workerMemory=12Gi", listed=[[quota(*STANDARD, 10_000.0)]]
    )
    result = check.vcpu_quota()
    assert result.status == "warn"
    assert "Service Quotas lists no quota named 'Running On-Demand Inf instances'" in result.message


@pytest.mark.parametrize(
    "family, expected",
    [
        ("dl", ec2_quotas.DL),
        ("hpc", ec2_quotas.HPC),
        ("inf", ec2_quotas.INF),
        ("trn", ec2_quotas.TRN),
        ("d", ec2_quotas.STANDARD),
        ("h", ec2_quotas.STANDARD),
        ("i", ec2_quotas.STANDARD),
        ("t", ec2_quotas.STANDARD),
        ("gr", ec2_quotas.G_AND_VT),
        ("vt", ec2_quotas.G_AND_VT),
        ("p", ec2_quotas.P),
        ("mac", None),
        ("u", None),
    ],
)
def test_families_are_matched_whole_never_by_first_letter(family, expected):
    assert ec2_quotas.vcpu_quota(family) == expected


@pytest.mark.parametrize("instance_type", ["p6-b200.48xlarge", "p6-b300.48xlarge"])
def test_p6_b200_and_b300_are_accepted_and_counted_as_p(instance_type):
    settings = load_settings(
        {"aws:region": "us-west-2", "elastic-training:nodeInstanceType": instance_type}, "dev", TODAY
    )
    assert ec2_quotas.vcpu_quota(INSTANCE_TYPE.fullmatch(settings.node_instance_type)["family"]) == ec2_quotas.P


def test_the_instance_type_pattern_still_refuses_nonsense():
    for bad in ("p6-.48xlarge", "c5-.large", "c5.4xlarge-", "p6-b200"):
        with pytest.raises(ConfigError, match="nodeInstanceType"):
            load_settings({"aws:region": "us-west-2", "elastic-training:nodeInstanceType": bad}, "dev", TODAY)
