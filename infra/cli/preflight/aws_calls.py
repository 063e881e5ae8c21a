"""Calling AWS from preflight: an answer, or CouldNotCheck when the call failed for a reason that
says nothing about the stack (denied, throttled, not implemented by the endpoint)."""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError


class CouldNotCheck(Exception):
    """An AWS call that failed for a reason that says nothing about the stack (denied, throttled, not there)."""


def reason(error: Exception) -> str:
    if isinstance(error, ClientError):
        err = error.response.get("Error", {})
        code = err.get("Code") or str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "error"))
        # An endpoint without the operation may answer with an HTML error page: keep its words only.
        message = " ".join(re.sub(r"<[^>]*>", " ", str(err.get("Message") or "")).split())[:160]
        return f"{code}: {message}" if message else code
    return " ".join(str(error).split()) or type(error).__name__


def aws_call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    try:
        return getattr(client, operation)(**kwargs)
    except NoCredentialsError:
        raise
    except (ClientError, BotoCoreError) as error:
        raise CouldNotCheck(f"{client.meta.service_model.service_name} {operation}: {reason(error)}") from None
