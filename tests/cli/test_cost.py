"""The cost estimate (infra/cli/cost.py) and its price table (infra/aws/prices.py): sums, the extended-support
line, no unrecorded price for any shipped stack, and the stack tables (README.md, docs/costs.md) in step with cost.json."""

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
    assert all(
        set(item) == {"what", "quantity", "unitUsd", "unit", "hourlyUsd", "runHourlyUsd", "source"}
        for item in written["items"]
    )
    assert written["hourlyUsd"] == pytest.approx(
        sum(i["hourlyUsd"] for i in written["items"] if i["hourlyUsd"] is not None)
    )
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
    """A new stack, region or instance type must come with its prices: in infra/aws/prices.py (or NOT READ
    and why) and, for its node types, in the catalog table (scripts/refresh_prices.py --add TYPE)."""
    assert cost.missing_prices(settings_of(stack)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_hourly_item_of_every_stack_is_priced(stack):
    """No stack in stacks/ bills an hour that the estimate cannot price: its totals are complete, not lower bounds."""
    estimate = cost.estimate(settings_of(stack), STANDARD_DAY)
    assert [i["what"] for i in estimate["items"] if i["quantity"] is not None and i["hourlyUsd"] is None] == []
    assert estimate["note"] in (
        "complete for the hourly items",
        "target is not eks: the stack creates no AWS resources that bill by the hour",
    )


def _nodes(estimate):
    return next(i for i in estimate["items"] if i["what"].startswith("worker nodes while a run trains:"))


def test_an_item_without_a_recorded_price_is_caught_and_never_zero():
    # x8aedz (moto 5.2.5 describes it) is newer than all three price tables.
    settings = settings_of("dev", "nodeInstanceType=x8aedz.6xlarge")
    assert len(cost.missing_prices(settings)) == 1
    assert "x8aedz.6xlarge is in none of the price tables" in cost.missing_prices(settings)[0]
    nodes = _nodes(cost.estimate(settings, STANDARD_DAY))
    assert nodes["unitUsd"] is None and nodes["hourlyUsd"] is None and nodes["source"].startswith("NOT READ")


def test_a_price_not_read_is_null_named_and_makes_the_total_a_lower_bound():
    estimate = cost.estimate(settings_of("dev", "nodeInstanceType=x8aedz.6xlarge"), STANDARD_DAY)
    unread = [i for i in estimate["items"] if i["unitUsd"] is None]
    assert unread and all(i["hourlyUsd"] is None for i in unread)
    assert [i["what"] for i in unread] == estimate["unpriced"]
    assert estimate["note"].startswith("lower bound") and all(" or more" in c for c in cost.readme_cells(estimate))
    assert cost.readme_cells(estimate)[0].endswith(" or more during one")


def test_the_nodes_are_priced_from_the_catalog_table_and_say_so():
    nodes = _nodes(cost.estimate(settings_of("dev"), STANDARD_DAY))
    # c5.4xlarge in us-west-2, vms.csv @ 27f67dd4; two while a run trains, none between runs (Karpenter's pool)
    assert (nodes["unitUsd"], nodes["runHourlyUsd"], nodes["hourlyUsd"]) == (0.68, 1.36, 0)
    assert nodes["source"].startswith("skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @ 27f67dd4")


def spot_settings(stack: str, *overrides: str):
    """The stack as a `capacityType: spot` one: the estimate reads the attribute the config gives it."""
    return SimpleNamespace(**{**vars(settings_of(stack, *overrides)), "capacity_type": "spot"})


@pytest.mark.parametrize(
    "region, table",
    [
        ("us-east-1", "karpenter-provider-aws@v1.15.2"),
        ("eu-west-1", "ec2-instances-info@v0.0.0-20250528091325-32acf84f42eb"),
    ],
)
def test_a_type_outside_the_zone_table_is_priced_from_the_region_tables(region, table):
    """Issue 39: c6a.8xlarge's workers were 'NOT IN THE TOTALS'; the region tables price them, On-Demand and Spot."""
    overrides = ("nodeInstanceType=c6a.8xlarge", f"aws:region={region}")
    settings = settings_of("dev", *overrides)
    assert not [m for m in cost.missing_prices(settings) if "c6a.8xlarge" in m]  # eu-west-1's other items: prices.py
    estimate = cost.estimate(settings, STANDARD_DAY)
    nodes = _nodes(estimate)
    assert nodes["unitUsd"] > 0 and nodes["runHourlyUsd"] == round(2 * nodes["unitUsd"], 6) and table in nodes["source"]
    assert not any("worker nodes" in what for what in estimate["unpriced"])
    spot = _nodes(cost.estimate(spot_settings("dev", *overrides), STANDARD_DAY))
    assert (
        0 < spot["unitUsd"] < nodes["unitUsd"]
        and "ec2-instances-info" in spot["source"]
        and "Spot median" in spot["source"]
    )


def test_a_spot_node_without_a_spot_price_is_unpriced_not_on_demand():
    # m8i.4xlarge: Karpenter's us-east-1 On-Demand price, no Spot price in any table.
    overrides = ("nodeInstanceType=m8i.4xlarge", "aws:region=us-east-1")
    assert _nodes(cost.estimate(settings_of("dev", *overrides), STANDARD_DAY))["unitUsd"] > 0
    estimate = cost.estimate(spot_settings("dev", *overrides), STANDARD_DAY)
    nodes = _nodes(estimate)
    assert nodes["unitUsd"] is None and nodes["hourlyUsd"] is None and nodes["runHourlyUsd"] is None
    assert nodes["source"].startswith("NOT READ: no Spot price for m8i.4xlarge in us-east-1")
    assert nodes["what"] in estimate["unpriced"] and estimate["note"].startswith("lower bound")


def test_a_spot_stack_prices_its_workers_at_spot_and_says_so():
    on_demand, spot = cost.estimate(settings_of("gpu"), STANDARD_DAY), cost.estimate(spot_settings("gpu"), STANDARD_DAY)
    workers = _nodes(spot)
    assert "Spot" in workers["what"] and spot["capacityType"] == "SPOT" and on_demand["capacityType"] == "ON_DEMAND"
    # g6.xlarge in us-west-2: Spot in usw2-az1/az3/az4 (az2 has none in the catalog), median 0.3961.
    assert workers["unitUsd"] == pytest.approx(0.3961) and "median of 3 zones" in workers["source"]
    # The system nodes stay On-Demand: only the workers change.
    changed = [a["what"] for a, b in zip(on_demand["items"], spot["items"]) if a["unitUsd"] != b["unitUsd"]]
    assert changed == ["worker nodes while a run trains: 2 x g6.xlarge On-Demand"]
    assert on_demand["runHourlyUsd"] - spot["runHourlyUsd"] == pytest.approx(2 * (0.8048 - 0.3961))
    assert on_demand["hourlyUsd"] == spot["hourlyUsd"]  # no worker node between runs, Spot or not


def test_live_prices_replace_the_table_and_name_their_source():
    read = prices.Price(
        0.7, "instance-hour", "AWS Price List API (pricing.get_products, read 2026-11-22)", "2026-11-22"
    )
    estimate = cost.estimate(settings_of("dev"), STANDARD_DAY, live=cost.LivePrices(on_demand={"c5.4xlarge": read}))
    assert (_nodes(estimate)["unitUsd"], _nodes(estimate)["source"]) == (0.7, read.source)
    assert estimate["pricesFrom"].startswith("AWS Price List API")


def test_live_service_prices_replace_the_table_for_that_run_only():
    """preflight's Price List answers for the non-EC2 items (infra/aws/live_service_prices.py) come before
    infra/aws/prices.py, as the nodes' answers come before the catalog; the table itself is unchanged."""
    api = "AWS Price List API (pricing.get_products, read 2026-11-22)"
    live = cost.LivePrices(
        services={
            "nat-gateway": prices.Price(
                0.05, "NAT-gateway-hour", f"{api}; usagetype USW2-NatGateway-Hours", "2026-11-22"
            ),
            "ecr-storage": prices.Price(0.1, "GB-month", f"{api}; usagetype USW2-TimedStorage-ByteHrs", "2026-11-22"),
        }
    )
    offline, estimate = (
        cost.estimate(settings_of("dev"), STANDARD_DAY),
        cost.estimate(settings_of("dev"), STANDARD_DAY, live=live),
    )
    nat, ecr = (
        next(i for i in estimate["items"] if i["what"].startswith(what)) for what in ("NAT gateway", "ECR storage")
    )
    assert (nat["unitUsd"], nat["source"], ecr["unitUsd"]) == (0.05, live.services["nat-gateway"].source, 0.1)
    assert estimate["hourlyUsd"] - offline["hourlyUsd"] == pytest.approx(0.05 - 0.045)
    assert "ECR storage, per GB of images (not in the totals)" in offline["unpriced"] and estimate["unpriced"] == []
    assert f"{api} for nat-gateway, ecr-storage; otherwise EC2 from" in estimate["pricesFrom"]
    assert (
        prices.PRICES[("ecr-storage", "us-west-2")].usd is None
        and prices.PRICES[("nat-gateway", "us-west-2")].usd == 0.045
    )


def test_a_run_costs_at_most_the_run_rate_for_the_job_timeout():
    estimate = cost.estimate(settings_of("smoke"), STANDARD_DAY)  # jobTimeoutMinutes 45
    assert estimate["runMaxMinutes"] == 45
    assert estimate["runMaxUsd"] == pytest.approx(estimate["runHourlyUsd"] * 45 / 60)
    assert cost.readme_cells(estimate)[2] == f"{cost.usd(estimate['runMaxUsd'])} (45 min)"


def test_every_recorded_price_names_its_source_and_the_day_it_was_read():
    for key, price in prices.PRICES.items():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.read_on), key
        assert len(price.source) > 40, key
        assert price.known or price.source.startswith("NOT READ"), key


def test_per_gb_rates_are_shown_but_not_in_the_total():
    estimate = cost.estimate(settings_of("smoke"), STANDARD_DAY)
    rates = [i for i in estimate["items"] if i["quantity"] is None]
    assert [i["what"].split(",")[0] for i in rates] == ["EFS storage", "ECR storage", "NAT data processing"]
    assert all(i["hourlyUsd"] is None for i in rates) and rates[0]["unit"] == "GB-month"


def test_a_stack_without_eks_costs_nothing_and_says_why():
    estimate = cost.estimate(SimpleNamespace(target="existing"), STANDARD_DAY)
    assert (estimate["hourlyUsd"], estimate["items"]) == (0.0, []) and "not eks" in estimate["note"]


# The stack table is on the front page and on the costs page, row for row.
STACK_TABLES = ["README.md", "docs/costs.md"]


def readme_stack_rows(where: str = "README.md") -> dict[str, list[str]]:
    text = (ROOT / where).read_text(encoding="utf-8")
    section = re.search(r"^## Stacks\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL).group(1)
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([a-z0-9-]+)`", cells[0]) if cells else None
        if match:
            rows[match.group(1)] = cells
    return rows


@pytest.mark.parametrize("where", STACK_TABLES)
@pytest.mark.parametrize("stack", STACKS)
def test_stack_table_shows_the_cost_synth_writes(stack, where, synth_stack):
    written = json.loads((synth_stack(stack).directory / "cost.json").read_text())
    rows = readme_stack_rows(where)
    assert stack in rows, f"{where}: the stack table has no row for `{stack}`"
    cells = list(cost.readme_cells(written))
    assert rows[stack][-len(cells) :] == cells, (
        f"{where} stack table, `{stack}`: the cost cells must be {cells!r} (from cost.json; "
        "`.venv/bin/python scripts/docs.py` rewrites them)"
    )


@pytest.mark.parametrize("where", STACK_TABLES)
def test_stack_table_has_no_row_for_a_stack_that_does_not_exist(where):
    assert sorted(readme_stack_rows(where)) == sorted(STACKS)


def test_the_two_stack_tables_are_the_same():
    assert readme_stack_rows("README.md").keys() == readme_stack_rows("docs/costs.md").keys()
    for stack, row in readme_stack_rows("README.md").items():
        # the same row, but the README's links into the docs start with docs/
        same = [cell.replace("](docs/", "](") for cell in row]
        assert same == readme_stack_rows("docs/costs.md")[stack], stack


def vcpus_from_aws_data(instance_type: str) -> int:
    """DefaultVCpus as EC2's DescribeInstanceTypes reports it, from the AWS-derived data moto 5.2.5 ships
    (moto/ec2/resources/instance_types.json.gz), the same data preflight's tests run against."""
    import gzip
    import importlib.util

    path = Path(importlib.util.find_spec("moto").origin).parent / "ec2" / "resources" / "instance_types.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))[instance_type]["VCpuInfo"]["DefaultVCpus"]


@pytest.mark.parametrize("where", STACK_TABLES)
@pytest.mark.parametrize("stack", STACKS)
def test_stack_table_states_the_vcpu_quota_each_stack_needs(stack, where):
    from infra.cli.preflight import QUOTA_BY_FAMILY
    from infra.config import INSTANCE_TYPE

    settings = settings_of(stack)
    if settings.target != "eks":  # no AWS account involved, so no quota either
        assert readme_stack_rows(where)[stack][2] == "none (no AWS)"
        return
    vcpus = vcpus_from_aws_data(settings.node_instance_type)
    code = QUOTA_BY_FAMILY[INSTANCE_TYPE.fullmatch(settings.node_instance_type)["family"]]
    if settings.capacity_type == "spot":
        # Spot workers count against the Spot quota of their family, by the name the EC2 user guide
        # gives it (using-spot-limits.html), not against the On-Demand one.
        code = "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"
    expected = f"{settings.node_max_count * vcpus} of `{code}` ({settings.node_max_count} × {vcpus})"
    # The on-demand system node group of every eks stack (infra/components/cluster.py).
    system = settings.system_node_instance_type
    system_vcpus = settings.system_node_count * vcpus_from_aws_data(system)
    system_code = QUOTA_BY_FAMILY[INSTANCE_TYPE.fullmatch(system)["family"]]
    expected += f", plus {system_vcpus} of `{system_code}` for the {settings.system_node_count} × {system} system nodes"
    assert readme_stack_rows(where)[stack][2] == expected


def test_the_costs_page_shows_the_figures_the_code_computes():
    """docs/costs.md's table of each stack with and without Spot workers, from infra/cli/cost_command.py stack_rows."""
    from datetime import datetime, timezone

    from infra.cli.cost_command import stack_rows

    page = (ROOT / "docs" / "costs.md").read_text(encoding="utf-8")
    section = re.search(r"^## On-Demand and Spot workers\n(.*?)(?=^## )", page, re.MULTILINE | re.DOTALL).group(1)
    shown = [line for line in section.splitlines() if re.match(r"\| `[a-z0-9-]+` \|", line)]
    expected = stack_rows(sorted(STACKS, key=shown_order(shown)), datetime.now(timezone.utc).date())
    assert shown == expected, "docs/costs.md stack table must read:\n" + "\n".join(expected)


def shown_order(shown: list[str]):
    names = [line.split("`")[1] for line in shown]
    return lambda stack: names.index(stack) if stack in names else len(names)


def test_a_region_without_recorded_prices_names_every_item_it_bills():
    """eu-west-1: the catalog prices c5.4xlarge there, infra/aws/prices.py records nothing for the region."""
    missing = cost.missing_prices(settings_of("dev", "aws:region=eu-west-1"))
    assert [m.split(" in ")[0].removeprefix("no price recorded for ") for m in missing] == [
        "eks-standard",
        "eks-extended",
        "nat-gateway",
        "public-ipv4",
        "ebs-gp3",
        "efs-standard",
        "ecr-storage",
        "nat-data",
    ]
    estimate = cost.estimate(settings_of("dev", "aws:region=eu-west-1"), STANDARD_DAY)
    assert _nodes(estimate)["unitUsd"] == 0.768 and estimate["note"].startswith("lower bound")


def test_an_item_outside_the_offline_table_says_that_preflight_reads_it():
    """Offline, the non-EC2 items are priced in us-east-1 and us-west-2 only; elsewhere each one is named
    unpriced with the way to a price: preflight with credentials asks the Price List API (issue 39)."""
    estimate = cost.estimate(settings_of("dev", "aws:region=eu-west-1"), STANDARD_DAY)
    unpriced = [i for i in estimate["items"] if i["unitUsd"] is None]
    assert len(unpriced) == 7 and [i["what"] for i in unpriced] == estimate["unpriced"]  # all but the nodes
    for item in unpriced:
        # Only the regions where the table has a price are named: ECR storage has none in us-west-2.
        priced_in = "us-east-1" if item["what"].startswith("ECR") else "us-east-1 and us-west-2"
        assert item["source"].startswith("NOT RECORDED: no offline price for "), item
        assert item["source"].endswith(
            f" in eu-west-1 (infra/aws/prices.py prices it in {priced_in} only); "
            "`elastic-training preflight` with AWS credentials reads it from the AWS Price "
            "List API"
        ), item
    assert any(
        "NOT IN THE TOTALS: NAT gateway: NOT RECORDED" in line and "preflight" in line for line in cost.lines(estimate)
    )
