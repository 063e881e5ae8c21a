"""Mistakes a new user makes, each refused with one line that says what is wrong and what to do
(issue 21, item 14), through the real `elastic-training synth` command where the user meets them.

- `aws:regoin`: the Pulumi CLI checks only the project's declared keys (pulumi/pulumi
  pkg/workspace/config.go validateStackConfigValue), so an `aws:` typo passed it and the stack ran
  without the region it meant. Known keys: those the installed pulumi-aws reads
  (pulumi_aws/config/vars.py).
- A YAML error in a stack file: PyYAML's MarkedYAMLError carries problem_mark/context_mark
  (0-based line and column, yaml/error.py); the line names them 1-based, as editors do.
- `imageUri` by tag on target eks: the README promises that no pod runs an image by tag.
- A stack file with a key twice, a misspelt `config:`, nothing in it, or named by its path; a stack
  name with a typo (issue 30, item 5): each is one line that names the real problem.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from infra.config import ConfigError, load_settings
from infra.config.provider_keys import aws_provider_keys
from infra.config.stack_file import StackConfigError, read_stack_file
from synth_support import REPO

DIGEST = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer@sha256:" + "c" * 64


def synth(root: Path, stack: str, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "infra.cli", "synth", stack, "--out", str(root / "out")]
    for override in overrides:
        command += ["-c", override]
    return subprocess.run(
        command,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(root)},
    )


@pytest.fixture
def project(tmp_path):
    """A copy of the project files synth reads, so a stack file can be broken without touching ours."""
    for name in ("Pulumi.yaml", "stacks"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    return tmp_path


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_typo_in_the_aws_namespace_is_refused_with_the_key_it_meant(project):
    line = one_line(synth(project, "dev", "aws:regoin=eu-west-1"))
    assert line.endswith(
        "config aws:regoin='eu-west-1' is invalid: unknown key of the aws provider (did you mean aws:region?)"
    )


def test_every_key_the_aws_provider_reads_is_accepted():
    keys = aws_provider_keys()
    assert {"region", "profile", "defaultTags", "assumeRoles", "skipCredentialsValidation"} <= keys
    for key in sorted(keys - {"region"}):  # region has its own rule; the others are the provider's to check
        load_settings({"aws:region": "us-west-2", f"aws:{key}": "x"}, "dev")


def refusal(stacks: Path, stack: str) -> str:
    """The line `synth`, `preflight` and `up` print for a stack file they cannot read."""
    with pytest.raises(StackConfigError) as error:
        read_stack_file(stack, stacks)
    return str(error.value)


def test_a_yaml_error_names_its_line_and_column(project):
    path = project / "stacks" / "Pulumi.dev.yaml"
    lines = path.read_text().splitlines()
    index = next(i for i, text in enumerate(lines) if "nodeMaxCount" in text)
    lines[index] = re.sub(r": (.*)$", r": [\1", lines[index])  # an unclosed list
    path.write_text("\n".join(lines) + "\n")
    column = lines[index].index("[") + 1
    # PyYAML notices at the next key, and says where the list was opened.
    assert re.fullmatch(
        rf"Pulumi\.dev\.yaml is not valid YAML: line {index + 2}, column \d+: expected ',' or ']', "
        rf"but got ':' \(while parsing a flow sequence at line {index + 1}, column {column}\)",
        refusal(project / "stacks", "dev"),
    )


def test_a_tab_names_its_line_and_column(project):
    path = project / "stacks" / "Pulumi.smoke.yaml"
    text = path.read_text()
    path.write_text(text + "\telastic-training:epochs: 3\n")
    assert refusal(project / "stacks", "smoke") == (
        f"Pulumi.smoke.yaml is not valid YAML: line {len(text.splitlines()) + 1}, "
        "column 1: found character '\\t' that cannot start any token"
    )


def test_an_eks_image_by_tag_is_refused_and_by_digest_accepted(project):
    tagged = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v1"
    line = one_line(synth(project, "dev", f"imageUri={tagged}"))
    assert line.endswith(
        f"config elastic-training:imageUri='{tagged}' is invalid: must be pinned by digest with target "
        "eks (registry/repo@sha256:<64 hex digits>): no pod runs an image by tag; "
        "`docker buildx imagetools inspect <image>` prints the digest"
    )
    assert load_settings({"aws:region": "us-west-2", "elastic-training:imageUri": DIGEST}, "dev").image_uri == DIGEST


def test_existing_keeps_its_tag_rule():
    """An image loaded into kind has no registry digest: target existing still takes a tag."""
    settings = load_settings(
        {
            "elastic-training:target": "existing",
            "elastic-training:imageUri": "docker.io/library/elastic-training:local",
            "elastic-training:storageClassName": "standard",
            "elastic-training:storageAccessMode": "ReadWriteOnce",
            "elastic-training:workersPerNode": "2",
            "elastic-training:dataSource": "synthetic",
        },
        "local",
    )
    assert settings.image_uri.endswith(":local")
    with pytest.raises(ConfigError):
        load_settings({"aws:region": "us-west-2", "elastic-training:imageUri": "docker.io/library/trainer:1"}, "dev")


# --- The stack file and the stack argument (issue 30, item 5), through the real command. -----------

COMMANDS = ("synth", "preflight", "cost", "up", "destroy")


@pytest.fixture
def clone(tmp_path):
    """A copy of the package with its stacks: the command reads stacks/ beside its own infra/ (STACKS_DIR),
    so a broken stack file there is met exactly as a user meets it in a clone."""
    shutil.copytree(REPO / "infra", tmp_path / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Pulumi.yaml", "stacks"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    return tmp_path


def command(root: Path, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "infra.cli", *argv],
        cwd=cwd or root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(root)},
    )


def test_a_key_twice_is_refused_where_the_pulumi_cli_refuses_it(clone):
    """yaml.v3 refuses a mapping key defined twice (go-yaml/yaml decode.go `mapping`, commit 00aeb2c6:
    "mapping key %#v already defined at line %d"); PyYAML alone keeps the last value silently."""
    path = clone / "stacks" / "Pulumi.dev.yaml"
    text = path.read_text()
    first = next(i for i, line in enumerate(text.splitlines()) if "elastic-training:epochs:" in line)
    path.write_text(text + "  elastic-training:epochs: 3\n")
    line = one_line(command(clone, "synth", "dev", "--out", str(clone / "out")))
    assert line == (
        f"error: Pulumi.dev.yaml is not valid YAML: line {len(text.splitlines()) + 1}, column 3: "
        f'mapping key "elastic-training:epochs" already defined at line {first + 1}'
    )
    assert not (clone / "out").exists()


@pytest.mark.parametrize(
    "document, expected",
    [
        ("", "Pulumi.dev.yaml is empty: a stack file needs a top-level `config:` mapping of keys to values"),
        ("# nothing yet\n", "Pulumi.dev.yaml is empty"),
        (
            "confg:\n  aws:region: us-west-2\n",
            "Pulumi.dev.yaml: unknown top-level key 'confg' (did you mean config?); the config keys go under `config:`",
        ),
        (
            "aws:region: us-west-2\n",
            "Pulumi.dev.yaml: unknown top-level key 'aws:region' (allowed: config, secretsprovider, "
            "encryptedkey, encryptionsalt, environment); the config keys go under `config:`",
        ),
        ("encryptionsalt: v1:abc\n", "Pulumi.dev.yaml has no top-level `config:` mapping, so it sets no config at all"),
        ("- aws:region\n", "Pulumi.dev.yaml: the file must be a mapping with a top-level `config:` key, not a list"),
    ],
    ids=["empty", "only-a-comment", "misspelt-config", "keys-without-config", "no-config", "a-list"],
)
def test_a_stack_file_without_its_config_says_so_not_that_the_region_is_invalid(clone, document, expected):
    """The fields of a stack file are ProjectStack's (pulumi/pulumi sdk/go/common/workspace/project.go:
    secretsprovider, encryptedkey, encryptionsalt, config, environment); any other key is never read."""
    (clone / "stacks" / "Pulumi.dev.yaml").write_text(document)
    line = one_line(command(clone, "synth", "dev", "--out", str(clone / "out")))
    assert line.startswith(f"error: {expected}") and "aws:region=''" not in line


def test_a_path_to_a_stack_file_names_its_stack():
    """`synth stacks/Pulumi.dev.yaml` once answered "no stack file Pulumi.dev.yaml.yaml"."""
    with tempfile.TemporaryDirectory() as out:
        result = command(REPO, "synth", "stacks/Pulumi.dev.yaml", "--out", str(Path(out) / "dev"))
        assert result.returncode == 0, result.stderr
        assert "synth: stack dev written to" in result.stdout
        assert json.loads((Path(out) / "dev" / "outputs.json").read_text())["clusterName"] == "elastic-training-dev"


@pytest.mark.parametrize(
    "argument, expected",
    [
        ("devv", "no stack file stacks/Pulumi.devv.yaml (did you mean dev?); stacks: dev gpu local smoke spot"),
        ("stacks/Pulumi.dve.yaml", "no stack file stacks/Pulumi.dve.yaml (did you mean dev?)"),
        (
            "Pulumi.dev.yml",
            "'Pulumi.dev.yml' is not a stack file; allowed: a stack name such as dev, or its stack file "
            "stacks/Pulumi.<stack>.yaml",
        ),
        (
            "/tmp/Pulumi.dev.yaml",
            "/tmp/Pulumi.dev.yaml is not in stacks/, the project's stacks folder: Pulumi reads a stack's "
            "config only from there (Pulumi.yaml's stackConfigDir; project folder .); copy it to "
            "stacks/Pulumi.dev.yaml and name the stack dev",
        ),
        ("dev stack", "'dev stack' is not a stack name; allowed: a stack name such as dev"),
    ],
    ids=["typo", "typo-in-a-path", "yml", "outside-stacks", "space"],
)
def test_a_stack_argument_that_names_no_stack_says_what_is_allowed(clone, argument, expected):
    line = one_line(command(clone, "synth", argument, "--out", str(clone / "out")))
    assert line.startswith(f"error: {expected}")


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_reads_the_stack_argument_alike(clone, name):
    line = one_line(command(clone, name, "smkoe", *(["--out", str(clone / "out")] if name == "synth" else [])))
    assert line.endswith(
        "no stack file stacks/Pulumi.smkoe.yaml (did you mean smoke?); stacks: dev gpu local smoke spot"
    )
