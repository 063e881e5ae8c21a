"""`elastic-training compare A B` (infra/cli/compare.py): two stacks' costs and the difference per run."""

from __future__ import annotations

import json
from datetime import date
from types import SimpleNamespace

import pytest

from infra.cli import compare, cost
from infra.config import load_settings
from infra.config.stack_file import read_stack_file

DAY = date(2026, 11, 22)


def estimate(stack: str, **extra):
    settings = load_settings(read_stack_file(stack), stack, DAY)
    return cost.estimate(SimpleNamespace(**{**vars(settings), **extra}) if extra else settings, DAY)


def test_the_difference_per_run_is_the_run_rates_difference_for_the_run_length(capsys):
    assert compare.main(["dev", "smoke", "--run-minutes", "30", "--json"], today=DAY) == 0
    result = json.loads(capsys.readouterr().out)
    dev, smoke = estimate("dev"), estimate("smoke")
    assert result["a"]["perRunUsd"] == pytest.approx(dev["runHourlyUsd"] / 2)
    assert result["difference"]["perRunUsd"] == pytest.approx(
        (smoke["runHourlyUsd"] - dev["runHourlyUsd"]) / 2, abs=1e-6
    )
    assert result["difference"]["dailyUsd"] == pytest.approx(smoke["dailyUsd"] - dev["dailyUsd"])


def test_spot_workers_show_what_a_run_saves():
    """The gpu stack on Spot workers against itself On-Demand, over its 120-minute ceiling."""
    result = compare.compare(estimate("gpu"), estimate("gpu", capacity_type="spot"))
    assert (result["a"]["capacityType"], result["b"]["capacityType"]) == ("ON_DEMAND", "SPOT")
    # 2 x g6.xlarge in us-west-2: On-Demand 0.8048, Spot median 0.3961 (vms.csv @ 27f67dd4), for 2 hours.
    assert result["difference"]["perRunUsd"] == pytest.approx(2 * (0.3961 - 0.8048) * 2)
    text = "\n".join(compare.lines(("gpu", "gpu-spot"), result))
    assert "per run (120 min)" in text and "-$1.6348" in text and "workers: gpu ON_DEMAND, gpu-spot SPOT" in text


def test_each_stack_runs_for_its_own_ceiling_unless_told():
    result = compare.compare(estimate("dev"), estimate("smoke"))
    assert (result["a"]["runMinutes"], result["b"]["runMinutes"]) == (120, 45)
    assert "per run (120/45 min)" in "\n".join(compare.lines(("dev", "smoke"), result))


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (["dev", "nosuch"], "no stack file stacks/Pulumi.nosuch.yaml"),
        (
            ["dev", "smoke", "--run-minutes", "0"],
            "argument --run-minutes: must be a number of minutes above 0 and at most 100000, got 0",
        ),
        (["dev", "smoke", "--b", "nodeMaxCount=many"], "elastic-training:nodeMaxCount"),
    ],
)
def test_bad_input_is_one_line(argv, phrase, capsys):
    assert compare.main(argv, today=DAY) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and phrase in err
