"""Kubernetes quantities in the one spelling Kubernetes writes back.

A Go program that decodes a quantity and encodes it again writes its canonical form, not what it
read: "0.5" comes back as "500m", "8192Mi" as "8Gi", "4000M" as "4G". The TorchElastic controller
does exactly that with the whole ElasticJob on every status update (pytorch/elastic kubernetes/
controllers/job.go UpdateJobStatusInApiServer, `r.Update`), so an ElasticJob whose inputs spell a
quantity another way differs from the stored object after every `pulumi refresh`; with the spec
replaced on any change (infra/components/workloads.py) that would mean a new training run. So the
specs write the canonical spelling from the start.

The rules, read in kubernetes/apimachinery at v0.15.11-beta.0 (commit 0cd702f8, the version the
controller's go.mod pins), pkg/api/resource/quantity.go:
- MarshalJSON writes CanonicalizeBytes (or the parsed string, which ParseQuantity keeps only when
  it already is canonical);
- BinarySI (a Ki/Mi/Gi/Ti/Pi/Ei suffix): a value below 1024 in magnitude, or one that is not a
  whole number, is written as DecimalSI; otherwise the largest power of 1024 that divides it
  (AsCanonicalBase1024Bytes, removeInt64Factors);
- DecimalSI: mantissa times 10^exponent with the exponent lowered to a multiple of 3
  (AsCanonicalBytes) and its suffix (n, u, m, "", k, M, G, T, P, E);
- values finer than 1n are rounded up to 1n (ParseQuantity: "the max precision is nano").
Exponent spellings (1e3) are not part of what the stack accepts and are refused here.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

QUANTITY = re.compile(r"^(?P<sign>[+-]?)(?P<number>[0-9]*\.?[0-9]*)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)$")
BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in DECIMAL.items()}
NANO = Decimal("1e-9")


def _value(text: str) -> tuple[Decimal, bool]:
    """(the exact value, whether its suffix was binary)."""
    match = QUANTITY.fullmatch(text.strip())
    if not match or match["number"] in ("", "."):
        raise ValueError(f"{text!r} is not a Kubernetes quantity such as 500m, 4, 24Gi or 512Mi")
    number = Decimal(match["number"] if not match["number"].endswith(".") else match["number"][:-1])
    suffix = match["suffix"]
    value = number * (Decimal(1024) ** BINARY[suffix]) if suffix in BINARY else number.scaleb(DECIMAL[suffix])
    return (-value if match["sign"] == "-" else value), suffix in BINARY


def _decimal(value: Decimal) -> str:
    """AsCanonicalBytes: the smallest whole mantissa, the exponent a multiple of 3."""
    sign, digits, exponent = value.normalize().as_tuple()
    mantissa = int("".join(map(str, digits)))
    shift = exponent % 3  # Python's % is never negative: lower the exponent to a multiple of 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    return f"{'-' if sign else ''}{mantissa}{DECIMAL_SUFFIX[exponent]}"


def canonical(text: str) -> str:
    """The spelling Kubernetes writes back for the quantity `text` ("0.5" -> "500m")."""
    value, binary = _value(text)
    if value == 0:
        return "0"
    with localcontext() as context:
        context.prec = 60
        # Finer than nano rounds away from zero to whole nanos.
        nanos = (value / NANO).to_integral_value(ROUND_CEILING if value > 0 else ROUND_FLOOR)
        value = nanos * NANO
        if binary and abs(value) >= 1024 and value == value.to_integral_value():
            whole, power = int(value), 0
            while whole % 1024 == 0 and power < len(BINARY):
                whole, power = whole // 1024, power + 1
            suffix = {p: s for s, p in BINARY.items()}.get(power, "")
            return f"{whole}{suffix}"
        if abs(value) >= Decimal("1e21"):
            raise ValueError(f"{text!r} is beyond the exa range this stack writes")
        return _decimal(value)
