"""The `aws:` namespace of a stack's config: only keys the AWS provider reads.

A stack may set the provider's own config (`aws:region`, `aws:profile`, ...). The Pulumi CLI checks
only the project's declared keys (pulumi/pulumi pkg/workspace/config.go validateStackConfigValue), so
a typo such as `aws:regoin` passes it, the provider never reads it, and the stack runs in another
region or none. The keys are the ones the installed pulumi-aws reads: its generated config module
(pulumi_aws/config/vars.py, one `__config__.get...('<key>')` per provider setting), so the list
follows the pinned provider version.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path

from infra.config.errors import ConfigError

AWS = "aws"


@functools.cache
def aws_provider_keys() -> frozenset[str]:
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pulumi-aws is not installed: run scripts/setup.sh")
    text = (Path(spec.submodule_search_locations[0]) / "config" / "vars.py").read_text(encoding="utf-8")
    return frozenset(re.findall(r"__config__\.get\w*\('(\w+)'", text))


def check_aws_keys(raw: Mapping[str, str]) -> None:
    """Refuse an `aws:` key the provider does not read, with the closest one it does."""
    known = aws_provider_keys()
    for full in sorted(raw):
        namespace, _, name = full.partition(":")
        if namespace == AWS and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"did you mean {AWS}:{close[0]}?" if close else f"the aws provider reads {', '.join(sorted(known))}"
            raise ConfigError(full, raw[full], f"unknown key of the aws provider ({hint})")
