"""Calling AWS from preflight: an answer, or CouldNotCheck when the call failed for a reason that
says nothing about the stack (denied, throttled, not implemented by the endpoint)."""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from botocore.parsers import ResponseParserError

# What a call raises when AWS, or what stands in its place, does not answer as AWS: ClientError and
# BotoCoreError, and what botocore's parsers raise on a body that is not AWS's format at all: a proxy's
# HTML page makes ResponseParserError (not a BotoCoreError, botocore/parsers.py), and a well-formed
# page without the expected element a KeyError from `_find_result_wrapped_shape`. Only the botocore
# call sits inside the `try`, so any exception there comes from the answer, never from our code.
UNEXPECTED_ANSWER = (Exception,)


class NotAnAwsAnswer(Exception):
    """An HTTP answer that is a web page, not an AWS API response (a proxy, a captive portal)."""


def refuse_web_pages(response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's `before-parse` hook (botocore/endpoint.py emits it with the raw response): AWS's APIs
    answer XML or JSON, never text/html. Without this, botocore parses a well-formed HTML page as an
    empty answer (no regions, no versions), and the checks would FAIL on what AWS never said."""
    kind = str(response_dict.get("headers", {}).get("content-type", "")).lower()
    if kind.startswith("text/html"):
        raise NotAnAwsAnswer(
            f"the endpoint answered a web page (HTTP {response_dict.get('status_code')}, {kind}), "
            "not an AWS response: a proxy or a wrong AWS_ENDPOINT_URL?"
        )


def guarded(client: Any) -> Any:
    """The client, answering NotAnAwsAnswer for a web page instead of parsing it."""
    client.meta.events.register("before-parse", refuse_web_pages)
    return client


class CouldNotCheck(Exception):
    """An AWS call that failed for a reason that says nothing about the stack (denied, throttled, not there)."""


def reason(error: Exception) -> str:
    if isinstance(error, ClientError):
        err = error.response.get("Error", {})
        code = err.get("Code") or str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "error"))
        # An endpoint without the operation may answer with an HTML error page: keep its words only.
        message = " ".join(re.sub(r"<[^>]*>", " ", str(err.get("Message") or "")).split())[:160]
        return f"{code}: {message}" if message else code
    if isinstance(error, NotAnAwsAnswer) or (
        isinstance(error, BotoCoreError) and not isinstance(error, ResponseParserError)
    ):
        return " ".join(str(error).split()) or type(error).__name__
    # Its text may quote the whole body; what matters is that the answer was not AWS's.
    first = " ".join(re.sub(r"<[^>]*>", " ", f"{type(error).__name__}: {error}").split())[:160]
    return f"the endpoint's answer is not an AWS response ({first})"


def aws_call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    try:
        return getattr(client, operation)(**kwargs)
    except NoCredentialsError:
        raise
    except UNEXPECTED_ANSWER as error:
        raise CouldNotCheck(f"{client.meta.service_model.service_name} {operation}: {reason(error)}") from None
