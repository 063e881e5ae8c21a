"""Raw stack config as the program sees it: full keys ("elastic-training:nodeCount") to strings.

Under `pulumi up` the engine hands the program its config; `synth` reads the same stack file
itself and applies `-c key=value` overrides with `pulumi config set`'s meaning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import pulumi
import yaml

from infra.config import PROJECT

STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


class StackConfigError(ValueError):
    """A stack file or override that cannot be read at all (not a rule about a value)."""


def current_config() -> dict[str, str]:
    """Every config key the engine gave the program. The SDK has no public call that lists them;
    this reads the same two places `pulumi.Config().get` looks in, in its order of precedence."""
    raw = dict(pulumi.runtime.config.get_config_env())
    raw.update(pulumi.runtime.config.CONFIG.get())
    return {key: str(value) for key, value in raw.items()}


def full_key(key: str) -> str:
    """`nodeCount` means the project's key; `aws:region` names its namespace."""
    return key if ":" in key else f"{PROJECT}:{key}"


def as_config_string(value: Any) -> str:
    """How the engine passes a stack file value to a program: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def available_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def read_stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> dict[str, str]:
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackConfigError(f"no stack file {path.name} in {stacks_dir}; stacks: {', '.join(available_stacks(stacks_dir))}")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise StackConfigError(f"{path.name} is not valid YAML: {str(error).splitlines()[0]}") from None
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise StackConfigError(f"{path.name}: 'config' must be a mapping of keys to values")
    raw = {}
    for key, value in config.items():
        if isinstance(value, dict) and "secure" in value:
            value = "[secret]"  # encrypted values cannot be read offline; synth shows a placeholder
        raw[full_key(str(key))] = as_config_string(value)
    return raw


def apply_overrides(raw: dict[str, str], overrides: Iterable[str]) -> dict[str, str]:
    merged = dict(raw)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise StackConfigError(f"-c {item!r} must be KEY=VALUE (e.g. -c nodeCount=3 or -c aws:region=eu-west-1)")
        merged[full_key(key)] = value
    return merged
