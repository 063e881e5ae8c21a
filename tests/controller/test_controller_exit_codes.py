"""The controller's exit-code table and the numbers jobs/ exits with are the same contract."""

from __future__ import annotations

import pytest

from controller import exit_codes
from jobs import cli
from jobs import exit_codes as jobs_exit_codes
from jobs.elastic import agent, stopping, torchrun


def test_retryable_codes_are_the_ones_the_workers_exit_with_when_stopped_from_outside():
    assert agent.EXIT_STOPPED_FROM_OUTSIDE == stopping.EXIT_STOPPED == exit_codes.SIGTERM_EXIT
    assert torchrun.EXIT_STORE_UNAVAILABLE == exit_codes.STORE_UNREACHABLE_EXIT
    assert cli.EXIT_USAGE == exit_codes.USAGE_EXIT


def test_the_controllers_table_is_the_jobs_table():
    """jobs/exit_codes.py is the one table the workers exit by; the controller's podFailurePolicy reads these."""
    assert set(exit_codes.PERMANENT) == jobs_exit_codes.PERMANENT
    assert set(exit_codes.RETRYABLE) == jobs_exit_codes.REPLACED_NOT_COUNTED


@pytest.mark.parametrize("code, disrupted, meaning", [
    (143, False, exit_codes.REPLACED), (130, False, exit_codes.REPLACED), (138, False, exit_codes.REPLACED),
    (1, True, exit_codes.REPLACED),  # a drained node's pod: DisruptionTarget comes first
    (2, False, exit_codes.INDEX_FAILED), (3, False, exit_codes.INDEX_FAILED), (126, False, exit_codes.INDEX_FAILED),
    (127, False, exit_codes.INDEX_FAILED),
    (1, False, exit_codes.COUNTED), (137, False, exit_codes.COUNTED), (None, False, exit_codes.COUNTED),
])
def test_meaning(code, disrupted, meaning):
    assert exit_codes.meaning(code, disrupted) == meaning
