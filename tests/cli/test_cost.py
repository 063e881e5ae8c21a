"""The cost estimate (infra/cli/cost.py) and its price table (infra/aws/prices.py): sums, the extended-support
line, no unrecorded price for any shipped stack, and the README's stack table in step with cost.json."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra import versions
from infra.cli import cost
from infra.aws import prices
from infra.config import load_settings
from infra.config.stack_file import apply_overrides, read_stack_file
from synth_support import STACKS

ROOT = Path(__file__).resolve().parents[2]
STANDARD_DAY = date(2026, 11, 22)  # 1.35: standard support until 2027-03-27 (infra/versions.py)


def settings_of(stack: str, *overrides: str):
    return load_settings(apply_overrides(read_stack_file(stack), overrides), stack, STANDARD_DAY)


def test_dev_total_is_the_sum_of_its_items(dev):
    written = json.loads((dev.directory / "cost.json").read_text())
    assert set(written) >= {"hourlyUsd", "dailyUsd", "items", "pricesFrom"}
    assert all(set(item) == {"what", "quantity", "unitUsd", "unit", "hourlyUsd"} for item in written["items"])
    assert written["hourlyUsd"] == pytest.approx(sum(i["hourlyUsd"] for i in written["items"] if i["hourlyUsd"] is not None))
    assert written["dailyUsd"] == pytest.approx(24 * written["hourlyUsd"])
    assert written["hourlyUsd"] > 0


def test_extended_support_changes_exactly_the_control_plane_line():
    settings = settings_of("dev")
    standard = cost.estimate(settings, STANDARD_DAY)
    extended = cost.estimate(settings, STANDARD_DAY, phase=versions.EXTENDED)
    changed = [index for index, (a, b) in enumerate(zip(standard["items"], extended["items"])) if a != b]
    assert changed == [0]
    assert (standard["items"][0]["unitUsd"], extended["items"][0]["unitUsd"]) == (0.10, 0.60)
    assert extended["hourlyUsd"] - standard["hourlyUsd"] == pytest.approx(0.50)


def test_the_calendar_decides_the_rate_on_the_day():
    settings = settings_of("dev", "kubernetesVersion=1.33")  # extended support since 2026-07-29
    assert cost.estimate(settings, date(2026, 7, 28))["items"][0]["unitUsd"] == 0.10
    assert cost.estimate(settings, date(2026, 7, 29))["items"][0]["unitUsd"] == 0.60


@pytest.mark.parametrize("stack", STACKS)
def test_every_item_of_every_stack_has_a_recorded_price(stack):
    """A new stack, region or instance type must come with its prices (or NOT READ and why) in infra/aws/prices.py."""
    assert cost.missing_prices(settings_of(stack)) == []


def test_an_item_without_a_recorded_price_is_caught_and_never_zero():
    settings = settings_of("dev", "nodeInstanceType=c5.9xlarge")
    assert cost.missing_prices(settings) == [
        "no price recorded for ec2:c5.9xlarge in us-west-2: add it to infra/aws/prices.py with its source and date "
        "(or NOT READ and why)"]
    nodes = cost.estimate(settings, STANDARD_DAY)["items"][2]
    assert nodes["unitUsd"] is None and nodes["hourlyUsd"] is None


def test_a_price_not_read_is_null_named_and_makes_the_total_a_lower_bound():
    estimate = cost.estimate(settings_of("dev"), STANDARD_DAY)
    unread = [i for i in estimate["items"] if i["unitUsd"] is None]
    assert unread and all(i["hourlyUsd"] is None for i in unread)
    assert [i["what"] for i in unread] == estimate["unpriced"]
    assert estimate["note"].startswith("lower bound") and cost.readme_cells(estimate)[0].endswith(" or more")


def test_every_recorded_price_names_its_source_and_the_day_it_was_read():
    for key, price in prices.PRICES.items():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.read_on), key
        assert len(price.source) > 40, key
        assert price.known or price.source.startswith("NOT READ"), key


def test_per_gb_rates_are_shown_but_not_in_the_total():
    estimate = cost.estimate(settings_of("smoke"), STANDARD_DAY)
    rates = [i for i in estimate["items"] if i["quantity"] is None]
    assert [i["what"].split(",")[0] for i in rates] == ["EFS storage", "ECR storage"]
    assert all(i["hourlyUsd"] is None for i in rates) and rates[0]["unit"] == "GB-month"


def test_a_stack_without_eks_costs_nothing_and_says_why():
    estimate = cost.estimate(SimpleNamespace(target="existing"), STANDARD_DAY)
    assert (estimate["hourlyUsd"], estimate["items"]) == (0.0, []) and "not eks" in estimate["note"]


def readme_stack_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Stacks\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL).group(1)
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([a-z0-9-]+)`", cells[0]) if cells else None
        if match:
            rows[match.group(1)] = cells
    return rows


@pytest.mark.parametrize("stack", STACKS)
def test_readme_stack_table_shows_the_cost_synth_writes(stack, synth_stack):
    written = json.loads((synth_stack(stack).directory / "cost.json").read_text())
    rows = readme_stack_rows()
    assert stack in rows, f"README's stack table has no row for `{stack}`"
    hourly, daily = cost.readme_cells(written)
    assert rows[stack][-2:] == [hourly, daily], (
        f"README stack table, `{stack}`: hourly and daily cells must be {hourly!r} and {daily!r} (from cost.json)")


def vcpus_from_aws_data(instance_type: str) -> int:
    """DefaultVCpus as EC2's DescribeInstanceTypes reports it, from the AWS-derived data moto 5.2.5 ships
    (moto/ec2/resources/instance_types.json.gz), the same data preflight's tests run against."""
    import gzip
    import importlib.util

    path = Path(importlib.util.find_spec("moto").origin).parent / "ec2" / "resources" / "instance_types.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))[instance_type]["VCpuInfo"]["DefaultVCpus"]


@pytest.mark.parametrize("stack", STACKS)
def test_readme_states_the_vcpu_quota_each_stack_needs(stack):
    from infra.cli.preflight import QUOTA_BY_FAMILY
    from infra.config import INSTANCE_TYPE, is_gpu_stack

    settings = settings_of(stack)
    if settings.target != "eks":  # no AWS account involved, so no quota either
        assert readme_stack_rows()[stack][2] == "none (no AWS)"
        return
    vcpus = vcpus_from_aws_data(settings.node_instance_type)
    code = QUOTA_BY_FAMILY[INSTANCE_TYPE.fullmatch(settings.node_instance_type)["family"]]
    expected = f"{settings.node_max_count * vcpus} of `{code}` ({settings.node_max_count} × {vcpus})"
    if is_gpu_stack(settings):  # the CPU system node group beside the GPU one (infra/components/cluster.py)
        system = settings.system_node_instance_type
        system_vcpus = settings.system_node_count * vcpus_from_aws_data(system)
        system_code = QUOTA_BY_FAMILY[INSTANCE_TYPE.fullmatch(system)["family"]]
        expected += f", plus {system_vcpus} of `{system_code}` for the {settings.system_node_count} × {system} system nodes"
    assert readme_stack_rows()[stack][2] == expected
