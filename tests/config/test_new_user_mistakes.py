"""Mistakes a new user makes, each refused with one line that says what is wrong and what to do
(issue 21, item 14), through the real `elastic-training synth` command where the user meets them.

- `aws:regoin`: the Pulumi CLI checks only the project's declared keys (pulumi/pulumi
  pkg/workspace/config.go validateStackConfigValue), so an `aws:` typo passed it and the stack ran
  without the region it meant. Known keys: those the installed pulumi-aws reads
  (pulumi_aws/config/vars.py).
- A YAML error in a stack file: PyYAML's MarkedYAMLError carries problem_mark/context_mark
  (0-based line and column, yaml/error.py); the line names them 1-based, as editors do.
- `imageUri` by tag on target eks: the README promises that no pod runs an image by tag.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
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
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(root)})


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
    assert line.endswith("config aws:regoin='eu-west-1' is invalid: unknown key of the aws provider "
                         "(did you mean aws:region?)")


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
    assert re.fullmatch(rf"Pulumi\.dev\.yaml is not valid YAML: line {index + 2}, column \d+: expected ',' or ']', "
                        rf"but got ':' \(while parsing a flow sequence at line {index + 1}, column {column}\)",
                        refusal(project / "stacks", "dev"))


def test_a_tab_names_its_line_and_column(project):
    path = project / "stacks" / "Pulumi.smoke.yaml"
    text = path.read_text()
    path.write_text(text + "\telastic-training:epochs: 3\n")
    assert refusal(project / "stacks", "smoke") == (f"Pulumi.smoke.yaml is not valid YAML: line {len(text.splitlines()) + 1}, "
                                                    "column 1: found character '\\t' that cannot start any token")


def test_an_eks_image_by_tag_is_refused_and_by_digest_accepted(project):
    tagged = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:v1"
    line = one_line(synth(project, "dev", f"imageUri={tagged}"))
    assert line.endswith(f"config elastic-training:imageUri='{tagged}' is invalid: must be pinned by digest with target "
                         "eks (registry/repo@sha256:<64 hex digits>): no pod runs an image by tag; "
                         "`docker buildx imagetools inspect <image>` prints the digest")
    assert load_settings({"aws:region": "us-west-2", "elastic-training:imageUri": DIGEST}, "dev").image_uri == DIGEST


def test_existing_keeps_its_tag_rule():
    """An image loaded into kind has no registry digest: target existing still takes a tag."""
    settings = load_settings({"elastic-training:target": "existing", "elastic-training:imageUri":
                              "docker.io/library/elastic-training:local", "elastic-training:storageClassName": "standard",
                              "elastic-training:storageAccessMode": "ReadWriteOnce", "elastic-training:workersPerNode": "2",
                              "elastic-training:dataSource": "synthetic"}, "local")
    assert settings.image_uri.endswith(":local")
    with pytest.raises(ConfigError):
        load_settings({"aws:region": "us-west-2", "elastic-training:imageUri": "docker.io/library/trainer:1"}, "dev")
