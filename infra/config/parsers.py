"""Raw config strings (what `pulumi config` holds: always text) into typed values.

A parser raises ValueError with what is allowed; load_settings turns that into a ConfigError.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

# Kubernetes quantities as users write them for CPU and memory ("15", "500m", "24Gi", "1.5").
QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def _parse_int(raw: str) -> int:
    if not re.fullmatch(r"-?[0-9]+", raw.strip()):
        raise ValueError("must be a whole number")
    return int(raw)


def parse_decimal(raw: str) -> float:
    # Plain decimal notation only: float() would also take "nan", "inf", "1e-1" and "0_5".
    if not re.fullmatch(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)", raw):
        raise ValueError("must be a decimal number such as 0.7")
    return float(raw)


def parse_optional_usd(raw: str) -> float | None:
    """An amount of US dollars such as 5 or 2.50, or "" for none."""
    if raw.strip() == "":
        return None
    if not re.fullmatch(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)", raw.strip()):
        raise ValueError('must be an amount of US dollars such as 5 or 2.50, or "" for no ceiling')
    return float(raw)


def _parse_bool(raw: str) -> bool:
    # Exactly the two words the Pulumi CLI takes for a boolean key (ValidateConfigValue in
    # pulumi/pulumi sdk/go/common/workspace/project.go); a YAML True in a stack file arrives as "true".
    if raw in ("true", "false"):
        return raw == "true"
    raise ValueError("must be true or false")


def _parse_string_list(raw: str) -> list[str]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError('must be a JSON list of strings, e.g. ["203.0.113.0/24"]') from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError('must be a JSON list of strings, e.g. ["203.0.113.0/24"]')
    return value


# By the Pulumi.yaml type of the key: the Pulumi CLI knows string, integer, boolean, array (and
# object) and has no number type (upstream-facts.md, fact 21), so a fraction is a string key with
# its own parser (ConfigKey.parse).
PARSERS: dict[str, Callable[[str], Any]] = {
    "integer": _parse_int,
    "boolean": _parse_bool,
    "string": str,
    "array": _parse_string_list,
}


_MEMORY_UNITS_MIB = {
    "Ki": 1 / 1024,
    "Mi": 1,
    "Gi": 1024,
    "Ti": 1024 * 1024,
    "k": 1000 / 1048576,
    "M": 1000**2 / 1048576,
    "G": 1000**3 / 1048576,
    "T": 1000**4 / 1048576,
}


def memory_mib(quantity: str) -> float:
    """A memory quantity that passed _quantity, in MiB ("24Gi" -> 24576; a bare number is bytes).
    The millis suffix 'm' makes no sense for memory and counts as bytes/1000."""
    match = QUANTITY.fullmatch(quantity)
    if match is None:
        raise ValueError(f"{quantity!r} is not a memory quantity")  # the key's rule refuses it first
    number, unit = float(match[1]), match[3]
    if unit == "m":
        return number / 1000 / 1048576
    return number * _MEMORY_UNITS_MIB[unit] if unit else number / 1048576
