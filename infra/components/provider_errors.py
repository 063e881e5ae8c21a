"""How a failure of the training wait reaches the person running `pulumi up`: one line naming the job
and the reason (then the worker's last log lines), not a Python traceback.

The SDK's provider host answers an exception from a provider method with
`context.abort(grpc.StatusCode.UNKNOWN, traceback.format_exc())` (pulumi/dynamic/__main__.py
`_abort_with_traceback`, pulumi 3.272.0), and the engine prints that text as the resource's error
(pulumi/pulumi sdk/go/common/util/rpcutil/rpcerror Error(): the status message). format_exc
honours `sys.tracebacklimit` (CPython Lib/traceback.py: `limit = getattr(sys, 'tracebacklimit',
None)`, a limit of 0 keeps no frame, and without frames there is no "Traceback (most recent call
last):" header), so at 0 the text is just `TrainingFailed: <message>`.
"""

from __future__ import annotations

import sys
from typing import NoReturn


class TrainingFailed(RuntimeError):
    """The wait's verdict: the run failed or cannot finish."""


# format_exception_only prefixes the type with its module except for builtins and __main__: without
# this the line would start "infra.components.provider_errors.TrainingFailed: ".
TrainingFailed.__module__ = "builtins"


def in_provider_host() -> bool:
    """Whether this process is the SDK's provider host (`python -m pulumi.dynamic`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name == "pulumi.dynamic.__main__"


def fail(message: str) -> NoReturn:
    """Raise the verdict so the host formats it without frames. The limit stays set for the host
    process, which serves this stack's one dynamic resource and ends with the update (an unexpected
    error there after it would lose its frames too); any other process (a test calling the
    provider) keeps its tracebacks."""
    if in_provider_host():
        sys.tracebacklimit = 0
    raise TrainingFailed(message)
