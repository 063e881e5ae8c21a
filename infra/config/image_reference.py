"""Image references as the distribution reference grammar reads them (what containerd, the kubelet
and Docker parse an `image:` with).

Built from distribution/reference @ 0965666a6ade2e06035fe352e38344be1e68951a: regexp.go (the
grammar, rebuilt below from the same pieces), reference.go `Parse` (its checks in its order: empty,
the anchored grammar with an upper-case retry, the 255-character repository path, then the digest)
and normalize.go `splitDockerDomain` (when the first path component names a registry). Digests are
checked as opencontainers/go-digest @ 137fd2bb009d6540304bc01b3c7758777514e430 digest.go
`Validate` and algorithm.go `Validate` do, with sha256 the one registered algorithm, as in the
grammar's own tests (reference_test.go imports only crypto/sha256) and the only one ECR serves.

Python's `re` differs from Go's RE2 in two places the patterns touch: `\\w` is ASCII only with
re.ASCII, and the POSIX class `[[:xdigit:]]` is written `[0-9A-Fa-f]`. Both engines return the
leftmost-first (backtracking) submatches, so the captured parts agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# regexp.go, piece by piece
_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_DOMAIN_NAME_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_OPTIONAL_PORT = r"(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}"
_IPV6_ADDRESS = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN_NAME = _DOMAIN_NAME_COMPONENT + r"(?:\." + _DOMAIN_NAME_COMPONENT + r")*"
_HOST = r"(?:" + _DOMAIN_NAME + r"|" + _IPV6_ADDRESS + r")"
_DOMAIN_AND_PORT = _HOST + _OPTIONAL_PORT
_PATH_COMPONENT = _ALPHANUMERIC + r"(?:" + _SEPARATOR + _ALPHANUMERIC + r")*"
_REMOTE_NAME = _PATH_COMPONENT + r"(?:/" + _PATH_COMPONENT + r")*"
_NAME = r"(?:" + _DOMAIN_AND_PORT + r"/)?" + _REMOTE_NAME

REFERENCE = re.compile(r"^(" + _NAME + r")(?::(" + _TAG + r"))?(?:@(" + _DIGEST + r"))?$", re.ASCII)
ANCHORED_NAME = re.compile(r"^(?:(" + _DOMAIN_AND_PORT + r")/)?(" + _REMOTE_NAME + r")$", re.ASCII)

# reference.go
REPOSITORY_NAME_TOTAL_LENGTH_MAX = 255
ERR_NAME_EMPTY = "repository name must have at least one component"
ERR_REFERENCE_INVALID_FORMAT = "invalid reference format"
ERR_NAME_CONTAINS_UPPERCASE = "repository name must be lowercase"
ERR_NAME_TOO_LONG = f"repository name must not be more than {REPOSITORY_NAME_TOTAL_LENGTH_MAX} characters"
# go-digest digest.go
ERR_DIGEST_INVALID_FORMAT = "invalid checksum digest format"
ERR_DIGEST_INVALID_LENGTH = "invalid checksum digest length"
ERR_DIGEST_UNSUPPORTED = "unsupported digest algorithm"
_DIGEST_ANCHORED = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")
# algorithm name -> hex length of its encoded part (sha256: 32 bytes)
REGISTERED_DIGESTS = {"sha256": 64}


class ReferenceError(ValueError):
    """`str()` is the grammar's own error text (reference.go / go-digest)."""


@dataclass(frozen=True)
class ImageReference:
    domain: str  # "" when the name has no domain part
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def name(self) -> str:
        return f"{self.domain}/{self.path}" if self.domain else self.path


def _validate_digest(digest: str) -> None:
    algorithm, sep, encoded = digest.partition(":")
    if not sep or not encoded:
        raise ReferenceError(ERR_DIGEST_INVALID_FORMAT)
    if algorithm not in REGISTERED_DIGESTS:
        raise ReferenceError(
            ERR_DIGEST_UNSUPPORTED if _DIGEST_ANCHORED.fullmatch(digest) else ERR_DIGEST_INVALID_FORMAT
        )
    if len(encoded) != REGISTERED_DIGESTS[algorithm]:
        raise ReferenceError(ERR_DIGEST_INVALID_LENGTH)
    if not re.fullmatch(r"[a-f0-9]+", encoded):
        raise ReferenceError(ERR_DIGEST_INVALID_FORMAT)


def parse(text: str) -> ImageReference:
    """reference.Parse: the parts of `text`, or ReferenceError with the grammar's reason."""
    if text == "":
        raise ReferenceError(ERR_NAME_EMPTY)
    match = REFERENCE.fullmatch(text)
    if match is None:
        if text.lower() != text and REFERENCE.fullmatch(text.lower()):
            raise ReferenceError(ERR_NAME_CONTAINS_UPPERCASE)
        raise ReferenceError(ERR_REFERENCE_INVALID_FORMAT)
    name = ANCHORED_NAME.fullmatch(match[1])
    domain, path = (name[1] or "", name[2]) if name else ("", match[1])
    if len(path) > REPOSITORY_NAME_TOTAL_LENGTH_MAX:
        raise ReferenceError(ERR_NAME_TOO_LONG)
    if match[3]:
        _validate_digest(match[3])
    return ImageReference(domain=domain, path=path, tag=match[2] or "", digest=match[3] or "")


def registry(text: str) -> str | None:
    """The registry a parsed reference names explicitly, by normalize.go splitDockerDomain's rule (the
    first path component is a registry if it is `localhost`, holds a `.` or `:`, or is not lower
    case), or None when a runtime would take it from Docker Hub (`trainer`, `library/trainer`)."""
    first, sep, _ = parse(text).name.partition("/")
    if not sep:
        return None
    if first == "localhost" or any(c in first for c in ".:") or first.lower() != first:
        return first
    return None
