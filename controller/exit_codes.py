"""What a worker's exit code means to the controller: elastic_training.exit_codes, the platform's one
table (the Job the controller renders carries it as its podFailurePolicy, render.py), under the names
the controller's modules use."""

from __future__ import annotations

from elastic_training.exit_codes import COUNTED, INDEX_FAILED, PERMANENT, REPLACED, RETRYABLE, TERMINATED, meaning

__all__ = ["COUNTED", "INDEX_FAILED", "PERMANENT", "REPLACED", "RETRYABLE", "TERMINATED", "meaning"]
