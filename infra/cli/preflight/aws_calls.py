"""Calling AWS from preflight: an answer, or CouldNotCheck when the call failed for a reason that
says nothing about the stack (denied, throttled, not implemented by the endpoint)."""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from botocore.parsers import ResponseParserError

# What an endpoint that is not quite AWS makes botocore raise: a proxy's HTML error page, a service that
# does not implement the call. ResponseParserError is not a BotoCoreError (botocore/parsers.py).
UNEXPECTED_ANSWER = (ClientError, BotoCoreError, ResponseParserError)


class CouldNotCheck(Exception):
    """An AWS call that failed for a reason that says nothing about the stack (denied, throttled, not there)."""


def reason(error: Exception) -> str:
    if isinstance(error, ClientError):
        err = error.response.get("Error", {})
        code = err.get("Code") or str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "error"))
        # An endpoint without the operation may answer with an HTML error page: keep its words only.
        message = " ".join(re.sub(r"<[^>]*>", " ", str(err.get("Message") or "")).split())[:160]
        return f"{code}: {message}" if message else code
    if isinstance(error, ResponseParserError):
        # Its text quotes the whole body; what matters is that the answer was not AWS's.
        first = " ".join(re.sub(r"<[^>]*>", " ", str(error)).split())[:160]
        return f"the endpoint's answer is not an AWS response ({first})"
    return " ".join(str(error).split()) or type(error).__name__


def aws_call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    try:
        return getattr(client, operation)(**kwargs)
    except NoCredentialsError:
        raise
    except UNEXPECTED_ANSWER as error:
        raise CouldNotCheck(f"{client.meta.service_model.service_name} {operation}: {reason(error)}") from None
