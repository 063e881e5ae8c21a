"""Config keys: one list, mirrored in Pulumi.yaml and docs/configuration.md, defaults valid, stacks valid."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import yaml

from synth_support import REPO, STACKS
from infra import versions
from infra.config import CONFIG_KEYS, KEYS_BY_NAME, PARSERS, PROJECT, ConfigError, load_settings
from infra.cli.config_docs import config_table
from infra.config.stack_file import as_config_string, read_stack_file

REGION = {"aws:region": "us-west-2"}
# A day on which the default Kubernetes version is in EKS standard support and not yet in the month
# before extended support (which warns), so the warnings asserted below do not depend on the day the
# suite runs (tests/config/test_kubernetes_support.py covers the others).
STANDARD_SUPPORT_DAY = versions.EKS_SUPPORT[versions.DEFAULT_KUBERNETES_VERSION].end_of_standard - timedelta(days=60)


def test_pulumi_yaml_declares_every_key_with_type_description_default():
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["name"] == PROJECT and "main" not in project and project["stackConfigDir"] == "stacks"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    declared = project["config"]
    assert list(declared) == [key.name for key in CONFIG_KEYS]
    for key in CONFIG_KEYS:
        entry = declared[key.name]
        assert entry["type"] == key.type and entry["description"] == key.description, key.name
        assert entry["default"] == key.default, key.name


def test_the_docs_config_table_is_generated_from_the_keys():
    assert config_table() in (REPO / "docs" / "configuration.md").read_text()


def test_defaults_pass_their_own_rules():
    settings = load_settings(REGION, "test")
    for key in CONFIG_KEYS:
        value = key.default_value
        assert getattr(settings, key.field) == (tuple(value) if isinstance(value, list) else value)
        # a default written back as config text (what the engine hands the program) parses to the same value
        assert key.parse_text(as_config_string(key.default)) == value


def test_min_accuracy_is_a_fraction_in_a_string_key():
    """The Pulumi CLI has no number type: minAccuracy is declared a string and parsed here."""
    key = KEYS_BY_NAME["minAccuracy"]
    assert (key.type, key.default, key.default_value) == ("string", "0.7", 0.7)
    assert "number" not in PARSERS and {k.type for k in CONFIG_KEYS} <= set(PARSERS)
    for text, value in (("0.3", 0.3), ("1", 1.0), ("0", 0.0), (".85", 0.85), ("1.0", 1.0)):
        assert load_settings({**REGION, f"{PROJECT}:minAccuracy": text}, "test").min_accuracy == value


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_file_is_valid(stack):
    settings = load_settings(read_stack_file(stack), stack)
    assert settings.stack == stack
    # An eks stack needs its region; target existing talks to no AWS API and needs none.
    assert bool(settings.region) == (settings.target == "eks")


def test_dev_reproduces_the_workshop_sizes():
    settings = load_settings(read_stack_file("dev"), "dev")
    assert (settings.region, settings.node_instance_type, settings.capacity_type) == (
        "us-west-2",
        "c5.4xlarge",
        "on-demand",
    )
    assert (settings.workers, settings.epochs, settings.batch_size) == (2, 10, 128)


def test_values_parse_from_config_strings():
    raw = {
        **REGION,
        f"{PROJECT}:capacityType": "spot",
        f"{PROJECT}:maxRestarts": "24",
        f"{PROJECT}:nodeMaxCount": "5",
        f"{PROJECT}:nodeInstanceTypes": '["c5d.4xlarge", "c5.4xlarge"]',
        f"{PROJECT}:retainData": "true",
        f"{PROJECT}:minAccuracy": "0.85",
        f"{PROJECT}:apiAllowedCidrs": '["203.0.113.0/24", "198.51.100.7/32"]',
    }
    settings = load_settings(raw, "test", today=STANDARD_SUPPORT_DAY)
    assert settings.node_max_count == 5 and settings.retain_data is True and settings.min_accuracy == 0.85
    assert settings.capacity_type == "spot" and settings.node_instance_types == ("c5d.4xlarge", "c5.4xlarge")
    assert settings.api_allowed_cidrs == ("203.0.113.0/24", "198.51.100.7/32")
    assert settings.warnings == ()


def test_open_api_endpoint_warns():
    (warning,) = load_settings(REGION, "test", today=STANDARD_SUPPORT_DAY).warnings
    assert "apiAllowedCidrs includes 0.0.0.0/0" in warning


def test_error_names_key_value_and_rule():
    with pytest.raises(ConfigError) as error:
        load_settings({**REGION, f"{PROJECT}:workers": "3"}, "test")
    assert str(error.value) == "config elastic-training:workers=3 is invalid: must be <= maxWorkers (2)"


def run_program_with(config: dict[str, str]) -> subprocess.CompletedProcess:
    """Run __main__.py as `pulumi up` would (runpy of the project root, Pulumi.yaml sets no `main`), under
    mocks, with this config."""
    script = textwrap.dedent(f"""
        import json, runpy, pulumi
        from infra.cli.mocks import RecordingMocks
        mocks = RecordingMocks("{PROJECT}", "dev", "us-west-2")
        mocks.install()
        pulumi.runtime.set_all_config({config!r})
        @pulumi.runtime.test
        def run():
            runpy.run_path(".", run_name="__main__")
        try:
            run()
        except pulumi.RunError as error:
            print("RunError:", error)
        print("registered:", len(mocks.registrations))
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_program_stops_on_bad_config_with_one_line_and_registers_nothing():
    result = run_program_with({**REGION, f"{PROJECT}:nodeMaxCount": "zero"})
    assert "RunError: config elastic-training:nodeMaxCount='zero' is invalid: must be a whole number" in result.stdout
    assert "registered: 0" in result.stdout, result.stdout + result.stderr


def test_program_registers_the_stack_on_good_config():
    result = run_program_with(read_stack_file("dev"))
    assert "RunError" not in result.stdout, result.stdout + result.stderr
    registered = int(result.stdout.rsplit("registered:", 1)[1])
    assert registered > 60


def test_every_commercial_region_in_botocore_is_accepted_and_no_other():
    """The region rule is botocore's partition data (botocore/data/partitions.json), not a pattern:
    each region of the `aws` partition passes; each region of another partition, and a name one
    letter off, is refused."""
    import botocore.loaders

    partitions = botocore.loaders.create_loader().load_data("partitions")["partitions"]
    base = {"aws:region": "us-west-2"}
    checked = 0
    for partition in partitions:
        for region in partition["regions"]:
            if region.startswith(partition["id"] + "-"):
                continue  # aws-global and the like: endpoints, not places
            if partition["id"] == "aws":
                assert load_settings({**base, "aws:region": region}, "t").region == region
            else:
                with pytest.raises(ConfigError, match=f"a region of the {partition['id']} partition"):
                    load_settings({**base, "aws:region": region}, "t")
            checked += 1
    assert checked >= 40
    for typo in ("us-west-22", "eu-west-0", "useast-1", "us-east-1 "):
        with pytest.raises(ConfigError, match="must be set to an AWS region"):
            load_settings({**base, "aws:region": typo}, "t")
