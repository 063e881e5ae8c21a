"""The wait's verdict is raised so that the SDK's provider host formats it as one line
(infra/components/provider_errors.py; the real host is driven in test_provider_host.py)."""

from __future__ import annotations

import sys
import traceback

import pytest

from infra.components import provider_errors


def test_outside_the_host_the_verdict_keeps_tracebacks_on():
    with pytest.raises(provider_errors.TrainingFailed) as failure:
        provider_errors.fail("ElasticJob training/train-run-1 failed: Failed: OOM")
    assert not hasattr(sys, "tracebacklimit")
    assert not provider_errors.in_provider_host()
    # The line the host's traceback.format_exc() ends with: the type without a module, the message.
    assert traceback.format_exception_only(failure.value) == [
        "TrainingFailed: ElasticJob training/train-run-1 failed: Failed: OOM\n"
    ]
