"""infra/specs/quantity.py spells a quantity as Kubernetes writes it back (apimachinery's
resource.Quantity, v0.15.11-beta.0 @ 0cd702f8, the controller's pin).

Checked three ways: apimachinery's own test table (pkg/api/resource/quantity_test.go
TestQuantityParseEmit, positive and negative), the value as the Kubernetes Python client's
parse_quantity reads it (unchanged), and the write-back model of tests/elasticjob_writeback.py
(written independently, by search over the SI exponents) over the grammar the config accepts.
"""

from __future__ import annotations

import itertools

import pytest
from kubernetes.utils import parse_quantity

from elasticjob_writeback import go_quantity
from infra.specs.quantity import canonical

# quantity_test.go TestQuantityParseEmit: {in, expect}
PARSE_EMIT = [("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"),
              (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n")]


@pytest.mark.parametrize("given, expected", PARSE_EMIT)
def test_apimachinery_parse_emit_table(given, expected):
    assert canonical(given) == expected
    assert canonical("-" + given) == "-" + expected


NUMBERS = ["1", "2", "3", "15", "16", "24", "100", "512", "1000", "1023", "1024", "1536", "4000", "8192", "0.5", "1.5",
           "2.25", "0.001", "2.0", "16.0"]
SUFFIXES = ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"]


@pytest.mark.parametrize("given", [n + s for n, s in itertools.product(NUMBERS, SUFFIXES)])
def test_same_value_and_the_write_back_models_spelling(given):
    spelled = canonical(given)
    assert parse_quantity(spelled) == parse_quantity(given)
    assert spelled == go_quantity(given) and canonical(spelled) == spelled


def test_not_a_quantity_is_refused():
    for bad in ("", ".", "1e3", "12X", "Gi"):
        with pytest.raises(ValueError):
            canonical(bad)
