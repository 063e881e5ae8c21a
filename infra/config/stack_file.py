"""Raw stack config as the program sees it: full keys ("elastic-training:nodeMaxCount") to strings.

Under `pulumi up` the engine hands the program its config; `synth` reads the same stack file
itself and applies `-c key=value` overrides with `pulumi config set`'s meaning.
"""

from __future__ import annotations

import datetime
import difflib
import json
import re
from pathlib import Path
from typing import Any, Iterable

import pulumi
import yaml

from infra.config import KEYS_BY_NAME, PROJECT, ConfigError

STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"
# A stack name as Pulumi allows it (alphanumerics, hyphens, underscores, periods: `pulumi stack init --help`),
# and the file Pulumi reads its config from, in Pulumi.yaml's stackConfigDir (stacks/).
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+")
STACK_FILE_NAME = re.compile(r"Pulumi\.(?P<stack>[A-Za-z0-9_.-]+)\.yaml")
STACK_ALLOWED = "a stack name such as dev, or its stack file stacks/Pulumi.<stack>.yaml"
# The top-level keys of a stack file: the fields of ProjectStack (pulumi/pulumi
# sdk/go/common/workspace/project.go). The CLI never reads any other key, so a misspelt `config:`
# would leave the stack without its config: refused here, with the key it meant.
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


class StackConfigError(ValueError):
    """A stack file or override that cannot be read at all (not a rule about a value)."""


def current_config() -> dict[str, str]:
    """Every config key the engine gave the program. The SDK has no public call that lists them;
    this reads the same two places `pulumi.Config().get` looks in, in its order of precedence."""
    raw = dict(pulumi.runtime.config.get_config_env())
    raw.update(pulumi.runtime.config.CONFIG.get())
    return {key: str(value) for key, value in raw.items()}


def full_key(key: str) -> str:
    """`nodeMaxCount` means the project's key; `aws:region` names its namespace."""
    return key if ":" in key else f"{PROJECT}:{key}"


def as_config_string(value: Any) -> str:
    """How the engine passes a stack file value to a program: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


class CliYamlLoader(yaml.SafeLoader):
    """YAML as the Pulumi CLI reads a stack file (gopkg.in/yaml.v3, resolve.go at go-yaml/yaml
    0d383ff9): only true/false (True, TRUE, False, FALSE) are booleans; yes/no/on/off, which PyYAML's
    YAML 1.1 makes booleans, stay strings, so the CLI refuses `retainData: yes` and so do we.

    A key twice in one mapping is an error, as yaml.v3 makes it (decode.go `mapping`, go-yaml/yaml
    00aeb2c6: `mapping key "x" already defined at line N`); PyYAML alone keeps the last one silently."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"mapping key {json.dumps(key)} already defined at line {seen[key].start_mark.line + 1}",
                        key_node.start_mark,
                    )
                if isinstance(key, str):
                    seen[key] = key_node
        return super().construct_mapping(node, deep)


CliYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
CliYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _stack_value(full: str, value: Any) -> str:
    """One stack-file value as the program gets it, refused where the Pulumi CLI refuses it first."""
    declared = KEYS_BY_NAME.get(full[len(PROJECT) + 1 :]) if full.startswith(f"{PROJECT}:") else None
    # The CLI type-checks a stack value against Pulumi.yaml (pulumi/pulumi pkg/workspace/config.go
    # validateStackConfigValue): only a YAML list is an array; a string, even of JSON, is a string.
    if declared is not None and declared.type == "array" and not isinstance(value, list):
        raise ConfigError(
            full,
            value,
            'must be a YAML list in the stack file, e.g. ["203.0.113.0/24"] '
            "(the Pulumi CLI refuses any other value for a list key)",
        )
    # ... and a YAML list or mapping is never a string (the program would get its JSON text).
    if declared is not None and declared.type == "string" and isinstance(value, (list, dict)):
        raise ConfigError(
            full,
            value,
            "must be a plain value in the stack file, not a YAML list or mapping "
            "(the Pulumi CLI refuses it for a string key)",
        )
    # yaml.v3 reads 2026-01-01 as a time, which the CLI passes on as "2026-01-01 00:00:00 +0000 UTC".
    if isinstance(value, (datetime.date, datetime.datetime)):
        raise ConfigError(full, str(value), "must be quoted: unquoted, YAML reads it as a date")
    return as_config_string(value)


def available_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """The stacks whose file can be opened: a dangling symlink is not one to suggest."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml") if p.is_file())


def yaml_problem(error: yaml.YAMLError) -> str:
    """Where and what, on one line: PyYAML's marks count from 0; editors count lines and columns from 1."""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    mark, context, context_mark = (getattr(error, name, None) for name in ("problem_mark", "context", "context_mark"))
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    opened = (
        f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
        if context and context_mark
        else ""
    )
    return f"{where}{problem}{opened}"


def shown(path: Path) -> str:
    """A path as the user can type it from where they are: relative to the current folder when it is
    under it, else absolute (run from another folder, `stacks/` would name the wrong one)."""
    resolved = path.absolute()
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        return str(resolved)


def stack_name(argument: str, stacks_dir: Path = STACKS_DIR) -> str:
    """The stack a command line names: its name (`dev`), or its stack file (`stacks/Pulumi.dev.yaml`,
    or `Pulumi.dev.yaml` alone), which must be in stacks/: Pulumi reads a stack's config from nowhere else.
    A relative path that does not exist from the current folder is read from the project folder."""
    if argument.endswith((".yaml", ".yml")) or "/" in argument:
        path = Path(argument)
        match = STACK_FILE_NAME.fullmatch(path.name)
        if match is None:
            raise StackConfigError(f"'{argument}' is not a stack file; allowed: {STACK_ALLOWED}")
        project_relative = stacks_dir.parent / path
        in_stacks = (
            path.parent == Path(".")
            or path.resolve().parent == stacks_dir.resolve()
            or (
                not path.is_absolute()
                and not path.exists()
                and project_relative.resolve().parent == stacks_dir.resolve()
            )
        )
        if not in_stacks:
            raise StackConfigError(
                f"{argument} is not in {shown(stacks_dir)}/, the project's stacks folder: Pulumi "
                f"reads a stack's config only from there (Pulumi.yaml's stackConfigDir; project "
                f"folder {shown(stacks_dir.parent)}); copy it to {shown(stacks_dir / path.name)} "
                f"and name the stack {match['stack']}"
            )
        argument = match["stack"]
    if not STACK_NAME.fullmatch(argument):
        raise StackConfigError(f"'{argument}' is not a stack name; allowed: {STACK_ALLOWED}")
    file = stacks_dir / f"Pulumi.{argument}.yaml"
    if file.is_symlink() and not file.exists():
        raise StackConfigError(
            f"{shown(file)} is a symbolic link to {file.readlink()}, which does not exist: "
            "point it at a stack file or remove it"
        )
    if not file.is_file():
        stacks = available_stacks(stacks_dir)
        close = difflib.get_close_matches(argument, stacks, n=1)
        meant = f" (did you mean {close[0]}?)" if close else ""
        raise StackConfigError(f"no stack file {shown(file)}{meant}; stacks: {' '.join(stacks) or 'none'}")
    return argument


def _stack_document(path: Path) -> dict[str, Any]:
    """The stack file's config mapping, or one line that says why there is none to read."""
    try:
        # UTF-8 whatever the locale: the Pulumi CLI (Go) reads stack files as UTF-8 bytes.
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise StackConfigError(f"cannot read {shown(path)}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise StackConfigError(f"{path.name} is not UTF-8 text (line {line}): save it as UTF-8") from None
    try:
        document = yaml.load(text, Loader=CliYamlLoader)
    except yaml.YAMLError as error:
        raise StackConfigError(f"{path.name} is not valid YAML: {yaml_problem(error)}") from None
    if document is None:
        raise StackConfigError(
            f"{path.name} is empty: a stack file needs a top-level `config:` mapping of keys to values "
            "(copy one of stacks/, docs/configuration.md)"
        )
    if not isinstance(document, dict):
        raise StackConfigError(
            f"{path.name}: the file must be a mapping with a top-level `config:` key, not a {type(document).__name__}"
        )
    for key in document:
        if key not in STACK_FILE_KEYS:
            close = difflib.get_close_matches(str(key), STACK_FILE_KEYS, n=1)
            meant = f"did you mean {close[0]}?" if close else f"allowed: {', '.join(STACK_FILE_KEYS)}"
            raise StackConfigError(
                f"{path.name}: unknown top-level key '{key}' ({meant}); the config keys go under `config:`"
            )
    if "config" not in document:
        raise StackConfigError(
            f"{path.name} has no top-level `config:` mapping, so it sets no config at all (docs/configuration.md)"
        )
    return document


def read_stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> dict[str, str]:
    path = stacks_dir / f"Pulumi.{stack_name(stack, stacks_dir)}.yaml"
    config = _stack_document(path)["config"] or {}
    if not isinstance(config, dict):
        raise StackConfigError(f"{path.name}: 'config' must be a mapping of keys to values")
    raw: dict[str, str] = {}
    written: dict[str, str] = {}
    for key, value in config.items():
        full = full_key(str(key))
        if full in written:
            # `nodeMaxCount` and `elastic-training:nodeMaxCount` are one key: which one wins would be an accident.
            raise StackConfigError(f"{path.name} sets {full} twice, as '{written[full]}' and as '{key}': keep one")
        written[full] = str(key)
        if isinstance(value, dict) and "secure" in value:
            raw[full] = "[secret]"  # encrypted values cannot be read offline; synth shows a placeholder
        else:
            raw[full] = _stack_value(full, value)
    return raw


def apply_overrides(raw: dict[str, str], overrides: Iterable[str]) -> dict[str, str]:
    merged = dict(raw)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise StackConfigError(f"-c {item!r} must be KEY=VALUE (e.g. -c nodeMaxCount=3 or -c aws:region=eu-west-1)")
        merged[full_key(key)] = value
    return merged
