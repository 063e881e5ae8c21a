"""Pulumi.yaml, the stack files and every documented `-c` override pass the Pulumi CLI's own checks.

The checks are the CLI's, re-stated in tests/pulumi_cli_model.py from pulumi/pulumi at
PULUMI_COMMIT (each function there names the file it models). An invalid Pulumi.yaml stops every
`pulumi` command; a stack value of the wrong type stops `preview` and `up`
(../shared/reference/upstream-facts.md, facts 21-22).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from synth_support import REPO, STACKS
from infra import versions
from infra.config import CONFIG_KEYS, PROJECT, ConfigError, load_settings
from infra.config.stack_file import apply_overrides, read_stack_file
from pulumi_cli_model import (
    CONFIG_TYPES,
    DECLARATION_KEYS,
    PROJECT_KEYS,
    NotModelled,
    StackValue,
    declarations,
    load_yaml,
    namespaced,
    stack_values,
    validate_config_value,
    validate_project,
    validate_stack,
    value_from_command_line,
    value_from_config_set_path,
)

PROJECT_FILE = REPO / "Pulumi.yaml"
TYPE_CHOICES = 'value must be one of "string", "integer", "boolean", "array", "object"'


def the_project() -> dict:
    return load_yaml(PROJECT_FILE.read_text())


def stack_document(stack: str) -> dict:
    return load_yaml((REPO / the_project()["stackConfigDir"] / f"Pulumi.{stack}.yaml").read_text())


# --- Pulumi.yaml -------------------------------------------------------------------------------


def test_pulumi_yaml_passes_the_cli_checks():
    assert validate_project(the_project()) == []


def test_pulumi_yaml_has_only_keys_the_cli_reads():
    """The schema lets any other top-level key through and the CLI ignores it: a misspelt
    `stackConfigdir` would pass and leave the stacks unfound. So we allow only keys the CLI reads."""
    assert set(the_project()) <= set(PROJECT_KEYS)


def test_runtime_is_python_with_options_its_language_host_takes():
    # sdk/python/cmd/pulumi-language-python/main.go parseOptions: virtualenv (string), typechecker
    # (mypy|pyright), toolchain (pip|poetry|uv); anything else there is an error.
    runtime = the_project()["runtime"]
    assert runtime["name"] == "python"
    options = runtime["options"]
    assert set(options) <= {"virtualenv", "typechecker", "toolchain"}
    assert options.get("toolchain", "pip") in ("pip", "poetry", "uv")
    assert isinstance(options["virtualenv"], str)


def test_backend_url_is_a_local_file_backend():
    # project.json backend: {url: string}, nothing else; pkg/backend/diy/backend.go FilePathPrefix "file://".
    backend = the_project()["backend"]
    assert set(backend) == {"url"} and backend["url"].startswith("file://")


def test_stack_config_dir_holds_every_stack():
    directory = REPO / the_project()["stackConfigDir"]
    assert directory.is_dir() and STACKS
    assert sorted(p.name for p in directory.glob("Pulumi.*.yaml")) == [f"Pulumi.{s}.yaml" for s in STACKS]


@pytest.mark.parametrize("key", [key.name for key in CONFIG_KEYS])
def test_each_declaration_is_one_the_cli_accepts(key):
    declaration = the_project()["config"][key]
    assert set(declaration) <= set(DECLARATION_KEYS)
    assert declaration["type"] in CONFIG_TYPES
    if declaration["type"] == "array":
        assert declaration["items"]["type"] in CONFIG_TYPES
    assert validate_config_value(declaration["type"], declaration.get("items"), declaration["default"])


# --- the CLI refuses what it should (the acceptance cases of issue 16) -------------------------


def mutated_project(tmp_path: Path, change) -> dict:
    """Write a changed copy of Pulumi.yaml and read it back as the CLI would."""
    document = yaml.safe_load(PROJECT_FILE.read_text())
    change(document)
    path = tmp_path / "Pulumi.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_yaml(path.read_text())


@pytest.mark.parametrize("bad_type", ["number", "float"])
def test_a_number_type_is_refused_with_the_cli_message(bad_type, tmp_path):
    """Today's main declared `minAccuracy: {type: number}`; the CLI stops on it."""

    def change(document):
        document["config"]["minAccuracy"].update(type=bad_type, default=0.7)

    errors = validate_project(mutated_project(tmp_path, change))
    assert "#/config/minAccuracy: oneOf failed" in errors
    assert f"#/config/minAccuracy/type: {TYPE_CHOICES}" in errors


def test_an_array_without_items_is_refused_with_the_cli_message(tmp_path):
    errors = validate_project(mutated_project(tmp_path, lambda d: d["config"]["apiAllowedCidrs"].pop("items")))
    assert errors == [
        "The configuration key 'apiAllowedCidrs' declares an array but does not specify the "
        "underlying type via the 'items' attribute"
    ]


@pytest.mark.parametrize(
    "key, default, type_name",
    [
        ("nodeMaxCount", "two", "integer"),
        ("retainData", "no", "boolean"),
        ("runId", 1, "string"),
        ("apiAllowedCidrs", [1], "array<string>"),
    ],
)
def test_a_default_of_another_type_is_refused(key, default, type_name, tmp_path):
    errors = validate_project(mutated_project(tmp_path, lambda d: d["config"][key].update(default=default)))
    assert errors == [
        f"The default value specified for configuration key '{key}' is not of the expected type '{type_name}'"
    ]


def test_an_unknown_declaration_key_is_refused(tmp_path):
    errors = validate_project(mutated_project(tmp_path, lambda d: d["config"]["nodeMaxCount"].update(defualt=3)))
    assert "#/config/nodeMaxCount: additionalProperties 'defualt' not allowed; did you mean 'default'?" in errors


def mutated_stack(tmp_path: Path, stack: str, **config) -> dict:
    path = tmp_path / f"Pulumi.{stack}.yaml"
    text = (REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    path.write_text(text + "".join(f"  {PROJECT}:{key}: {value}\n" for key, value in config.items()))
    return load_yaml(path.read_text())


@pytest.mark.parametrize(
    "key, yaml_value, type_name",
    [
        ("nodeMaxCount", "2.5", "integer"),
        ("nodeMaxCount", "two", "integer"),
        ("retainData", "yes", "boolean"),  # a string to yaml.v3, unlike PyYAML's YAML 1.1
        ("apiAllowedCidrs", "203.0.113.0/24", "array<string>"),
        ("apiAllowedCidrs", "'[\"203.0.113.0/24\"]'", "array<string>"),  # JSON in a string is a string
        ("clusterAdminArns", "[1, 2]", "array<string>"),
        ("minAccuracy", "[0.3]", "string"),
    ],
)
def test_a_stack_value_of_the_wrong_type_is_refused_with_the_cli_message(key, yaml_value, type_name, tmp_path):
    document = mutated_stack(tmp_path, "dev", **{key: yaml_value})
    assert validate_stack(the_project(), "dev", stack_values(PROJECT, document)) == [
        f"Stack 'dev' with configuration key '{key}' must be of type '{type_name}'"
    ]


def test_a_required_key_missing_from_a_stack_is_refused(tmp_path):
    def change(document):
        del document["config"]["runId"]["default"]
        del document["config"]["namespace"]["default"]

    project = mutated_project(tmp_path, change)
    values = {k: v for k, v in stack_values(PROJECT, stack_document("smoke")).items() if k != f"{PROJECT}:runId"}
    assert validate_stack(project, "smoke", values) == [
        "Stack 'smoke' is missing configuration values 'namespace' and 'runId'"
    ]


# --- the stack files ---------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_value_has_its_declared_type(stack):
    assert validate_stack(the_project(), stack, stack_values(PROJECT, stack_document(stack))) == []


class RecordingConfig(Mapping):
    """Raw config that notes every key the program looks up."""

    def __init__(self, values: Mapping[str, str]):
        self.values, self.read = dict(values), set()

    def __getitem__(self, key):
        self.read.add(key)
        return self.values[key]

    def get(self, key, default=None):
        self.read.add(key)
        return self.values.get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return key in self.values

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)


def keys_the_program_reads(raw: Mapping[str, str]) -> set[str]:
    recording = RecordingConfig(raw)
    load_settings(recording, "test")
    return recording.read


def assert_namespaces(keys: set[str], raw: Mapping[str, str], where: str) -> None:
    """Project keys must be declared (the CLI lets undeclared ones through; the program refuses them);
    a key of another namespace must be one the program reads (aws:region), or it does nothing."""
    declared = {namespaced(PROJECT, k) for k in declarations(the_project())}
    read = keys_the_program_reads(raw)
    assert "aws:region" in read
    for key in keys:
        if key.startswith(f"{PROJECT}:"):
            assert key in declared, f"{where}: {key} is not declared in Pulumi.yaml"
        else:
            assert key in read, f"{where}: {key} is in no namespace the program reads"


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_key_is_declared_or_read_by_the_program(stack):
    values = stack_values(PROJECT, stack_document(stack))
    assert_namespaces(set(values), read_stack_file(stack), f"stacks/Pulumi.{stack}.yaml")


def test_a_key_in_an_unknown_namespace_is_caught(tmp_path):
    """The program itself refuses it now (issue 39: `elastic_training:workers` was ignored)."""
    from infra.config import ConfigError

    raw = {**read_stack_file("dev"), "awz:region": "us-west-2"}
    with pytest.raises(ConfigError, match=r"unknown config namespace 'awz' \(did you mean aws:region\?\)"):
        assert_namespaces(set(raw), raw, "mutated dev")


# --- every -c and `pulumi config set` the README, the docs and the workflows show -------------


@dataclass(frozen=True)
class Documented:
    where: str
    key: str
    value: StackValue
    command: str


def command_texts(path: Path) -> list[str]:
    """Shell text that may hold commands: README fenced blocks and inline code; workflow files whole."""
    text = path.read_text()
    if path.suffix == ".md":
        blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
        spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        return [line for block in blocks for line in block.splitlines()] + spans
    return text.splitlines()


def documented_config(path: Path) -> list[Documented]:
    """Every `-c/--config KEY=VALUE` given to pulumi or elastic-training synth/preflight/cost, and every `pulumi config set`."""
    found = []
    for line in command_texts(path):
        for start in re.finditer(r"\bpulumi\b|\belastic-training\b", line):
            try:
                words = shlex.split(line[start.start() :], comments=True)
            except ValueError:
                continue  # prose with an apostrophe, not a command
            words = words[: next((i for i, w in enumerate(words) if w in ("&&", "||", ";", "|")), len(words))]
            command = " ".join(words)
            if words[:3] == ["pulumi", "config", "set"]:
                found += _config_set(path.name, words[3:], command)
            elif words[:2] in (
                ["elastic-training", "synth"],
                ["elastic-training", "preflight"],
                ["elastic-training", "cost"],
            ) or (words[0] == "pulumi" and len(words) > 1 and words[1] in ("up", "preview")):
                found += _overrides(path.name, words, command)
    return found


def _overrides(where: str, words: list[str], command: str) -> list[Documented]:
    found = []
    for i, word in enumerate(words):
        setting = (
            words[i + 1]
            if word in ("-c", "--config") and i + 1 < len(words)
            else word.split("=", 1)[1]
            if word.startswith("--config=")
            else None
        )
        if setting is not None:
            key, _, value = setting.partition("=")
            found.append(Documented(where, namespaced(PROJECT, key), value_from_command_line(value), command))
    return found


def _config_set(where: str, args: list[str], command: str) -> list[Documented]:
    path = "--path" in args
    flags_with_value = ("-s", "--stack", "--config-file", "--type")
    positional = [
        a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in flags_with_value)
    ]
    if len(positional) < 2 or any("<" in a or a.isupper() for a in positional):
        return []  # the command named in prose, or with placeholders (`pulumi config set <key> <value>`, `KEY VALUE`)
    key, value = positional
    if not path:
        return [Documented(where, namespaced(PROJECT, key), value_from_command_line(value), command)]
    match = re.fullmatch(r"([\w:]+)\[0\]", key)
    if not match:
        raise NotModelled(f"{command}: only `--path 'KEY[0]' VALUE` is modelled")
    return [Documented(where, namespaced(PROJECT, match[1]), value_from_config_set_path([value]), command)]


DOCUMENTED_IN = [
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted((REPO / ".github" / "workflows").glob("*.yml")),
]


def all_documented() -> list[Documented]:
    return [item for path in DOCUMENTED_IN for item in documented_config(path)]


def test_the_documented_commands_are_found():
    """Not a hand-made list: what the extraction finds in the README and docs/ must include the synth
    example, a `config set` and a `--path` list, or the checks below would pass on nothing."""
    found = all_documented()
    keys = {item.key for item in found}
    assert {f"{PROJECT}:nodeMaxCount", "aws:region", f"{PROJECT}:runId", f"{PROJECT}:apiAllowedCidrs"} <= keys
    assert any(item.value.object for item in found)
    # pulumi/actions' `config-map` input is another way to set config; none is used, none is modelled.
    for workflow in (path for path in DOCUMENTED_IN if path.suffix == ".yml"):
        assert "config-map" not in workflow.read_text(), workflow


@pytest.mark.parametrize("item", all_documented(), ids=lambda item: f"{item.where}:{item.key}")
def test_each_documented_value_passes_the_cli(item):
    values = {**stack_values(PROJECT, stack_document("dev")), item.key: item.value}
    assert validate_stack(the_project(), "dev", values) == [], item.command
    assert_namespaces({item.key}, read_stack_file("dev"), item.command)


def test_a_json_list_through_config_set_is_caught(tmp_path):
    """What the README used to say: `pulumi config set apiAllowedCidrs '["203.0.113.0/24"]'`."""
    readme = tmp_path / "README.md"
    readme.write_text("`pulumi config set apiAllowedCidrs '[\"203.0.113.0/24\"]'`\n")
    (item,) = documented_config(readme)
    values = {**stack_values(PROJECT, stack_document("dev")), item.key: item.value}
    assert validate_stack(the_project(), "dev", values) == [
        "Stack 'dev' with configuration key 'apiAllowedCidrs' must be of type 'array<string>'"
    ]


# --- ours is at least as strict as the CLI -----------------------------------------------------

# Stack-file values as a user might write them: numbers, quoted numbers, words, YAML 1.1 booleans,
# lists, JSON in strings, every key's default and a good value for it.
YAML_VALUES = [
    "2",
    "3",
    "0",
    "-1",
    "2.5",
    "2.0",
    "0.3",
    "'0.3'",
    "0.85",
    ".5",
    "1",
    "70",
    "1e-1",
    "0x10",
    "010",
    "true",
    "false",
    "yes",
    "'true'",
    "True",
    "''",
    "two",
    "c5.4xlarge",
    "'15'",
    "500m",
    "24Gi",
    "1.33",
    "'1.33'",
    "run-2",
    "[]",
    "['203.0.113.0/24']",
    "[1, 2]",
    "'[\"203.0.113.0/24\"]'",
    "~",
    "synthetic:500",
    "['arn:aws:iam::123456789012:role/admin']",
    "training",
    "efs-sc",
]
GOOD = {
    "kubernetesVersion": versions.SUPPORTED_KUBERNETES_VERSIONS[0],
    "imageUri": "'123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1'",
    "dataSource": "s3://bucket/cifar.tar.gz",
    "dataMd5": "''",
    "nodeMaxCount": "1",
    "availabilityZoneCount": "3",
    "nodeDiskGiB": "50",
    "jobTimeoutMinutes": "60",
    "batchSize": "64",
    "epochs": "3",
}


def candidate_yaml(key) -> list[str]:
    default = yaml.safe_dump(key.default, default_flow_style=True).removesuffix("\n...\n").strip()
    return YAML_VALUES + [default] + ([GOOD[key.name]] if key.name in GOOD else [])


def ours_accepts(raw: dict[str, str]) -> bool:
    try:
        load_settings({"aws:region": "us-west-2", **raw}, "test")
        return True
    except ConfigError:
        return False


@pytest.mark.parametrize("key", CONFIG_KEYS, ids=lambda key: key.name)
def test_every_stack_file_value_we_accept_the_cli_accepts(key, tmp_path):
    """The same stack file read by synth (ours: infra.config.stack_file + load_settings) and by the CLI model."""
    declaration = declarations(the_project())[key.name]
    accepted = 0
    for text in candidate_yaml(key):
        (tmp_path / "Pulumi.t.yaml").write_text(f"config:\n  {PROJECT}:{key.name}: {text}\n")
        document = load_yaml((tmp_path / "Pulumi.t.yaml").read_text())
        cli = validate_config_value(
            declaration["type"],
            declaration.get("items"),
            stack_values(PROJECT, document)[f"{PROJECT}:{key.name}"].content(),
        )
        try:
            ours = ours_accepts(read_stack_file("t", tmp_path))
        except ConfigError:  # refused while reading the file
            ours = False
        assert cli or not ours, f"{key.name}: {text} passes infra/config/ but the Pulumi CLI refuses it"
        accepted += ours
    assert accepted, f"no candidate for {key.name} passes our rules: the comparison would prove nothing"


@pytest.mark.parametrize("key", [k for k in CONFIG_KEYS if k.type != "array"], ids=lambda key: key.name)
def test_every_command_line_value_we_accept_the_cli_accepts(key):
    """`-c KEY=VALUE` / `pulumi config set KEY VALUE`: the CLI stores VALUE as a string."""
    declaration = declarations(the_project())[key.name]
    texts = [yaml.safe_load(t) if isinstance(yaml.safe_load(t), str) else t for t in candidate_yaml(key)]
    accepted = 0
    for text in texts:
        cli = validate_config_value(declaration["type"], None, value_from_command_line(text).content())
        ours = ours_accepts(apply_overrides({}, [f"{key.name}={text}"]))
        assert cli or not ours, f"-c {key.name}={text} passes infra/config/ but the Pulumi CLI refuses it"
        accepted += ours
    assert accepted, key.name


@pytest.mark.parametrize("key", [k for k in CONFIG_KEYS if k.type == "array"], ids=lambda key: key.name)
def test_a_list_key_through_the_command_line_is_where_synth_is_looser(key):
    """The one known difference, pinned so it stays visible: synth's `-c KEY=[...]` takes a JSON list,
    while the CLI stores any `-c`/`config set` text as a string and refuses it for an array key. The
    README shows lists only through `--path` (checked above), never as `-c` JSON."""
    text = {
        "apiAllowedCidrs": '["203.0.113.0/24"]',
        "nodeInstanceTypes": '["c5.4xlarge", "c5a.4xlarge"]',
        "trainingCommand": '["python", "-m", "mytrain"]',
        "dataPrepCommand": '["python", "-m", "myprep"]',
        "testCommand": '["python", "-m", "mytest"]',
    }.get(key.name, '["arn:aws:iam::123456789012:role/admin"]')
    assert ours_accepts(apply_overrides({}, [f"{key.name}={text}"]))
    assert not validate_config_value("array", {"type": "string"}, value_from_command_line(text).content())
    item = text[2:-2]  # the README's way: pulumi config set --path 'KEY[0]' ITEM
    assert validate_config_value("array", {"type": "string"}, value_from_config_set_path([item]).content())
