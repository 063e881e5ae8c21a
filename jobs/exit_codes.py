"""The workers' exit codes: the platform's one table, elastic_training.exit_codes (see its docstring
for what each code makes the platform do)."""

from __future__ import annotations

from elastic_training.exit_codes import (
    CANNOT_CONTINUE,
    CANNOT_EXECUTE,
    COMMAND_NOT_FOUND,
    FAILURE,
    INTERRUPTED,
    KILLED,
    OK,
    PERMANENT,
    RETRYABLE,
    STORE_UNAVAILABLE,
    TERMINATED,
    USAGE,
    from_returncode,
)

__all__ = [
    "CANNOT_CONTINUE",
    "CANNOT_EXECUTE",
    "COMMAND_NOT_FOUND",
    "FAILURE",
    "INTERRUPTED",
    "KILLED",
    "OK",
    "PERMANENT",
    "RETRYABLE",
    "STORE_UNAVAILABLE",
    "TERMINATED",
    "USAGE",
    "from_returncode",
]
