"""Preflight's capacity checks for every node group the stack creates: is each instance type offered
in the chosen zones, and does the account's On-Demand vCPU quota hold each group at its largest.

Every eks stack has two: the workers' pool (nodeInstanceType, up to nodeMaxCount nodes, Karpenter's:
infra/components/capacity.py) and the on-demand system group (systemNodeInstanceType, systemNodeCount
nodes: infra/components/cluster.py), whose type must be offered in the same zones and counts against
the Standard quota, while GPU workers count against G/VT or P (infra/aws/ec2_quotas.py). Each check stays one line: the
groups' findings joined, the worst status wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from infra.cli.preflight.aws_calls import UNEXPECTED_ANSWER

from infra.aws.ec2_quotas import VcpuQuota, vcpu_quota
from infra.cli.preflight.aws_calls import CouldNotCheck, aws_call, reason
from infra.config import INSTANCE_TYPE, Settings


class PreflightRun(Protocol):
    """What these checks read of a preflight run (checks.Preflight is such a run): the stack, the zones it
    takes, and an AWS client per service. Named here so that checks.py imports this module and not
    the other way round."""

    settings: Settings
    zones: list[str]

    def client(self, service: str) -> Any: ...


WORST_FIRST = ("fail", "warn", "skip", "pass")


@dataclass(frozen=True)
class NodeGroup:
    type_key: str  # the config key naming its instance type
    instance_type: str
    count_key: str  # the config key bounding its size
    max_count: int
    label: str  # how a message names it ("" for the training nodes, as before there was a second group)


def node_groups(settings: Settings) -> list[NodeGroup]:
    groups = [NodeGroup("nodeInstanceType", settings.node_instance_type, "nodeMaxCount", settings.node_max_count, "")]
    groups.append(
        NodeGroup(
            "systemNodeInstanceType",
            settings.system_node_instance_type,
            "systemNodeCount",
            settings.system_node_count,
            "system nodes: ",
        )
    )
    return groups


def worst(statuses: list[str]) -> str:
    return min(statuses, key=WORST_FIRST.index)


def offered_zones(preflight: PreflightRun, kind: str) -> list[str]:
    pages = (
        preflight.client("ec2")
        .get_paginator("describe_instance_type_offerings")
        .paginate(LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [kind]}])
    )
    try:
        return sorted({o["Location"] for page in pages for o in page.get("InstanceTypeOfferings", [])})
    except UNEXPECTED_ANSWER as error:
        raise CouldNotCheck(f"ec2 describe_instance_type_offerings: {reason(error)}") from None


def offering(preflight: PreflightRun) -> tuple[str, str, str]:
    """(status, message, fix) of the instance-type check over every node group."""
    zones, region = preflight.zones, preflight.settings.region
    groups = node_groups(preflight.settings)
    offered = {group.instance_type: offered_zones(preflight, group.instance_type) for group in groups}
    lines, fixes, nowhere = [], [], []
    for group in groups:
        kind, where = group.instance_type, offered[group.instance_type]
        missing = [zone for zone in zones if zone not in where]
        if not where:
            lines.append(f"{group.label}{kind} is not offered in any zone of {region}")
            nowhere.append(group)
        elif missing:
            lines.append(
                f"{group.label}{kind} is not offered in {', '.join(missing)}; it is offered in {', '.join(where)}"
            )
    if not lines:
        kinds = " and ".join(group.instance_type for group in groups)
        return "pass", f"{kinds} {'is' if len(groups) == 1 else 'are'} offered in {', '.join(zones)}", ""
    for group in nowhere:
        fixes.append(f"choose another {group.type_key} (-c {group.type_key}=...) or a region that offers it")
    if not nowhere:
        # The program takes the first availabilityZoneCount usable zones by name; the longest run of
        # them that offers every group's type is the count that would work.
        usable_prefix = 0
        for zone in zones:
            if not all(zone in where for where in offered.values()):
                break
            usable_prefix += 1
        keys = " / ".join(group.type_key for group in groups)
        fix = (
            f"-c availabilityZoneCount={usable_prefix} (the stack takes the first zones by name), "
            if usable_prefix >= 2
            else ""
        )
        fixes.append(fix + f"or another {keys} offered in all chosen zones, or another region")
    return "fail", "; ".join(lines), "; ".join(fixes)


def quota_value(preflight: PreflightRun, quota: VcpuQuota) -> tuple[int, str, str] | None:
    """(value, code, name) of an EC2 quota: by its code, or by its documented name in the account's
    Service Quotas list; None when the list has no quota of that name."""
    client = preflight.client("service-quotas")
    if quota.code:
        found = aws_call(client, "get_service_quota", ServiceCode="ec2", QuotaCode=quota.code)["Quota"]
        return int(found["Value"]), quota.code, found.get("QuotaName", quota.name)
    token: dict[str, Any] = {}
    while True:
        page = aws_call(client, "list_service_quotas", ServiceCode="ec2", **token)
        for found in page.get("Quotas", []):
            if found.get("QuotaName") == quota.name:
                return int(found["Value"]), found["QuotaCode"], quota.name
        if not page.get("NextToken"):
            return None
        token = {"NextToken": page["NextToken"]}


def vcpu_quotas(preflight: PreflightRun) -> tuple[str, str, str]:
    """(status, message, fix) of the vcpu-quota check. Groups whose families share a quota (the
    Standard one holds c/m workers and m system nodes alike) are summed against it: EC2 counts every
    running instance of those families against the one limit."""
    results: list[tuple[str, str, str]] = []
    members: dict[VcpuQuota, list[tuple[NodeGroup, int]]] = {}
    for group in node_groups(preflight.settings):
        try:
            sized = group_size(preflight, group)
        except CouldNotCheck as error:  # one group's answer missing leaves the others' findings standing
            results.append(("warn", f"{group.label}could not check: {error}", ""))
            continue
        if isinstance(sized, tuple) and isinstance(sized[0], str):
            results.append(sized)
        else:
            quota, vcpus = sized
            members.setdefault(quota, []).append((group, vcpus))
    # Quotas known by code first, then those looked up by name in the account's list.
    for quota, sized_groups in sorted(members.items(), key=lambda item: not item[0].code):
        try:
            results.append(quota_check(preflight, quota, sized_groups))
        except CouldNotCheck as error:
            results.append(("warn", f"could not check: {error}", ""))
    return (
        worst([status for status, _, _ in results]),
        "; ".join(message for _, message, _ in results),
        "; ".join(fix for _, _, fix in results if fix),
    )


def group_size(preflight: PreflightRun, group: NodeGroup) -> tuple[VcpuQuota, int] | tuple[str, str, str]:
    """(its quota, vCPUs of one node) of a node group, or the (status, message, fix) that ends its check."""
    kind, label = group.instance_type, group.label
    matched = INSTANCE_TYPE.fullmatch(kind)
    if matched is None:  # the config's rule refuses such a type first
        return "skip", f"{label}{kind} is not an instance type name", ""
    family = matched["family"]
    quota = vcpu_quota(family)
    if quota is None:
        return "warn", f"{label}no On-Demand vCPU quota known for the {family} family ({kind})", ""
    types = aws_call(preflight.client("ec2"), "describe_instance_types", InstanceTypes=[kind]).get("InstanceTypes", [])
    if not types:
        return "skip", f"{label}EC2 does not describe {kind} in {preflight.settings.region}", ""
    return quota, types[0]["VCpuInfo"]["DefaultVCpus"]


def quota_check(
    preflight: PreflightRun, quota: VcpuQuota, sized_groups: list[tuple[NodeGroup, int]]
) -> tuple[str, str, str]:
    """(status, message, fix) of the groups that count against one quota, at their largest together."""
    region = preflight.settings.region
    needed = sum(group.max_count * vcpus for group, vcpus in sized_groups)
    found = quota_value(preflight, quota)
    if found is None:
        return "warn", f"could not check: Service Quotas lists no quota named {quota.name!r}", ""
    value, code, name = found
    # One group alone is named as before ("system nodes: ..."); a shared quota names every group's key.
    label = sized_groups[0][0].label if len(sized_groups) == 1 else ""
    sizes = " + ".join(f"{group.count_key} {group.max_count} x {vcpus} vCPUs" for group, vcpus in sized_groups)
    if value >= needed:
        return (
            "pass",
            f"{label}{name} ({code}) is {value} vCPUs; {sizes} = {needed} "
            "(instances already running in the region count too)",
            "",
        )
    kinds = " + ".join(
        f"{group.count_key} {group.max_count} x {group.instance_type} ({vcpus} vCPUs)" for group, vcpus in sized_groups
    )
    keys = " / ".join(group.count_key for group, _ in sized_groups)
    return (
        "fail",
        f"{label}{name} ({code}) is {value} vCPUs; {kinds} needs {needed}",
        f"request {needed}: `aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
        f"--desired-value {needed} --region {region}`, or lower {keys} / choose a smaller type",
    )
