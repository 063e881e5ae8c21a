"""The controller's exit-code table is the contract's (elastic_training.exit_codes), and so are the
numbers jobs/ exits with."""

from __future__ import annotations

import pytest

from controller import exit_codes
from elastic_training import exit_codes as contract
from jobs import cli
from jobs import exit_codes as jobs_exit_codes
from jobs.elastic import agent, stopping, torchrun


def test_the_codes_the_workers_exit_with_when_stopped_from_outside_are_the_contracts():
    assert agent.EXIT_STOPPED_FROM_OUTSIDE == stopping.EXIT_STOPPED == contract.TERMINATED == 143
    assert torchrun.EXIT_STORE_UNAVAILABLE == contract.STORE_UNAVAILABLE == 138
    assert cli.EXIT_USAGE == contract.USAGE == 2


def test_the_controller_and_the_jobs_read_the_one_table():
    """No copy: both modules hand out the contract's own objects."""
    assert exit_codes.PERMANENT is contract.PERMANENT is jobs_exit_codes.PERMANENT
    assert exit_codes.RETRYABLE is contract.RETRYABLE is jobs_exit_codes.RETRYABLE
    assert exit_codes.meaning is contract.meaning


@pytest.mark.parametrize(
    "code, disrupted, meaning",
    [
        (143, False, exit_codes.REPLACED),
        (130, False, exit_codes.REPLACED),
        (138, False, exit_codes.REPLACED),
        (1, True, exit_codes.REPLACED),  # a drained node's pod: DisruptionTarget comes first
        (2, False, exit_codes.INDEX_FAILED),
        (3, False, exit_codes.INDEX_FAILED),
        (126, False, exit_codes.INDEX_FAILED),
        (127, False, exit_codes.INDEX_FAILED),
        (1, False, exit_codes.COUNTED),
        (137, False, exit_codes.COUNTED),
        (None, False, exit_codes.COUNTED),
    ],
)
def test_meaning(code, disrupted, meaning):
    assert exit_codes.meaning(code, disrupted) == meaning
