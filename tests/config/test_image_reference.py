"""infra/config/image_reference.py against the grammar's own examples: the test tables of
distribution/reference @ 0965666a6ade2e06035fe352e38344be1e68951a (reference_test.go
TestReferenceParse, regexp_test.go TestFullNameRegexp and TestReferenceRegexp), read from its Go
sources into fixtures/distribution-reference-cases.json by fixtures/make_reference_cases.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config import image_reference
from infra.config.image_reference import ImageReference, ReferenceError

CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "distribution-reference-cases.json").read_text())
# The Go error values the tables name, and their texts (reference.go; go-digest digest.go).
ERRORS = {
    "ErrNameEmpty": image_reference.ERR_NAME_EMPTY,
    "ErrReferenceInvalidFormat": image_reference.ERR_REFERENCE_INVALID_FORMAT,
    "ErrNameContainsUppercase": image_reference.ERR_NAME_CONTAINS_UPPERCASE,
    "ErrNameTooLong": image_reference.ERR_NAME_TOO_LONG,
    "digest.ErrDigestInvalidLength": image_reference.ERR_DIGEST_INVALID_LENGTH,
    "digest.ErrDigestUnsupported": image_reference.ERR_DIGEST_UNSUPPORTED,
}


def _id(case: dict) -> str:
    return case["input"][:60] or "<empty>"


def test_the_tables_were_read_whole():
    assert len(CASES["TestReferenceParse"]) == 48  # 49 in the file, one commented out (its FIXME)
    assert len(CASES["TestFullNameRegexp"]) == 63 and len(CASES["TestReferenceRegexp"]) == 12
    assert {case["err"] for case in CASES["TestReferenceParse"] if "err" in case} == set(ERRORS)


@pytest.mark.parametrize("case", CASES["TestReferenceParse"], ids=_id)
def test_parse_as_reference_parse(case):
    if "err" in case:
        with pytest.raises(ReferenceError) as refused:
            image_reference.parse(case["input"])
        assert str(refused.value) == ERRORS[case["err"]]
        return
    ref = image_reference.parse(case["input"])
    assert (ref.name, ref.domain, ref.tag, ref.digest) == (
        case.get("repository", ""),
        case.get("domain", ""),
        case.get("tag", ""),
        case.get("digest", ""),
    )


@pytest.mark.parametrize("case", CASES["TestFullNameRegexp"], ids=_id)
def test_the_name_grammar(case):
    match = image_reference.ANCHORED_NAME.fullmatch(case["input"])
    assert (match is not None) == case["match"]
    if match:  # checkRegexp compares the submatches a case lists, no more
        subs = case.get("subs", [])
        assert [group or "" for group in match.groups()][: len(subs)] == subs


@pytest.mark.parametrize("case", CASES["TestReferenceRegexp"], ids=_id)
def test_the_reference_grammar(case):
    match = image_reference.REFERENCE.fullmatch(case["input"])
    assert (match is not None) == case["match"]
    if match:  # checkRegexp compares the submatches a case lists, no more
        subs = case.get("subs", [])
        assert [group or "" for group in match.groups()][: len(subs)] == subs


def test_a_trailing_newline_is_not_a_reference():
    # Python's `$` also matches before a final newline; Go's does not.
    with pytest.raises(ReferenceError):
        image_reference.parse("registry.example/trainer:1\n")


@pytest.mark.parametrize(
    ("text", "registry"),
    [
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v1", "123456789012.dkr.ecr.us-west-2.amazonaws.com"),
        ("localhost/trainer", "localhost"),
        ("localhost:5000/trainer", "localhost:5000"),
        ("registry:5000/a/b", "registry:5000"),
        ("[::1]:5000/trainer", "[::1]:5000"),
        ("trainer:latest", None),
        ("library/trainer", None),
        ("example/trainer:1", None),
    ],
)
def test_registry_follows_split_docker_domain(text, registry):
    assert image_reference.registry(text) == registry


def test_the_issues_path_is_not_a_reference():
    with pytest.raises(ReferenceError, match="invalid reference format"):
        image_reference.parse("../../etc/passwd")
    assert image_reference.parse("docker.io/library/elastic-training:local") == ImageReference(
        domain="docker.io", path="library/elastic-training", tag="local"
    )
