"""Config mistakes that passed silently (issue 39), each refused or warned with one line."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest

import infra.cli.synth
from infra import versions
from infra.config import ConfigError, load_settings
from infra.config.errors import show_value
from infra.config.stack_file import StackConfigError, read_stack_file


def dev(**overrides: str) -> dict[str, str]:
    raw = read_stack_file("dev")
    raw.update({(k if ":" in k else f"elastic-training:{k}"): v for k, v in overrides.items()})
    return raw


@pytest.mark.parametrize(
    "key, meant",
    [
        ("elastic_training:workers", "elastic-training:workers"),
        ("elastictraining:epochs", "elastic-training:epochs"),
        ("kubernets:enableServerSideApply", "kubernetes:enableServerSideApply"),
    ],
)
def test_a_misspelt_namespace_is_refused_with_the_one_it_meant(key, meant):
    with pytest.raises(ConfigError) as refused:
        load_settings({**read_stack_file("dev"), key: "1"}, "dev")
    assert str(refused.value).endswith(f"unknown config namespace '{key.split(':')[0]}' (did you mean {meant}?)")


def test_the_providers_namespaces_are_accepted():
    settings = load_settings(
        {
            **read_stack_file("dev"),
            "kubernetes:enableServerSideApply": "true",
            "pulumi:disable-default-providers": '["kubernetes"]',
        },
        "dev",
    )
    assert settings.stack == "dev"


def test_a_key_in_both_forms_is_refused(tmp_path):
    (tmp_path / "Pulumi.twice.yaml").write_text(
        "config:\n  aws:region: us-west-2\n  nodeMaxCount: 3\n  elastic-training:nodeMaxCount: 4\n", encoding="utf-8"
    )
    with pytest.raises(StackConfigError) as refused:
        read_stack_file("twice", tmp_path)
    assert str(refused.value) == (
        "Pulumi.twice.yaml sets elastic-training:nodeMaxCount twice, as 'nodeMaxCount' and as "
        "'elastic-training:nodeMaxCount': keep one"
    )


@pytest.mark.parametrize(
    "value, why",
    [
        ("24", "24 without a unit is 24 bytes"),
        ("500m", "the unit m is thousandths (of a byte, for memory), not mebibytes (Mi)"),
        ("24Mi", "24Mi is 24 MiB"),
        ("1000Mi", "1000Mi is 1000 MiB"),
    ],
)
def test_worker_memory_too_small_to_train_is_refused_saying_what_it_meant(value, why):
    with pytest.raises(ConfigError) as refused:
        load_settings(dev(workerMemory=value), "dev")
    assert str(refused.value).endswith(why)
    assert "500m" not in str(refused.value).split(":")[2].split("(")[0], "the example no longer offers 500m"


def test_a_version_days_before_extended_support_is_warned_with_the_price_and_the_date():
    version = "1.34"
    starts = versions.EKS_SUPPORT[version].end_of_standard
    warned = load_settings(dev(kubernetesVersion=version), "dev", starts - timedelta(days=4)).warnings
    (line,) = [w for w in warned if "extended support" in w]
    assert line == (
        f"config elastic-training:kubernetesVersion='1.34' enters EKS extended support on {starts.isoformat()} "
        "(in 4 days): from then the control plane costs $0.60/hour instead of $0.10/hour; versions in "
        "standard support for longer: 1.35"
    )
    early = starts - timedelta(days=31)  # the notice starts 30 days ahead (relations.EXTENDED_SUPPORT_NOTICE_DAYS)
    assert not [w for w in load_settings(dev(kubernetesVersion=version), "dev", early).warnings if "extended" in w]


def test_today_the_version_list_names_no_version_eks_refuses():
    with pytest.raises(ConfigError) as refused:
        load_settings(dev(kubernetesVersion="1.20"), "dev", date.today())
    named = str(refused.value).split("must be one of ")[1].split(" (")[0].split(", ")
    assert all(versions.eks_support_phase(v, date.today()) != versions.ENDED for v in named)


def test_more_zones_than_the_region_is_known_to_have_are_warned():
    """us-west-1: the price table lists usw1-az1 and usw1-az3 (and EKS refuses usw1-az2), so 4 zones
    passed synth and failed only at `pulumi up` (issue 39)."""
    warned = load_settings(dev(availabilityZoneCount="4", **{"aws:region": "us-west-1"}), "dev").warnings
    (line,) = [w for w in warned if "availabilityZoneCount" in w]
    assert line.startswith(
        "config elastic-training:availabilityZoneCount=4 but the zones known in us-west-1 that EKS "
        "accepts are 2 (usw1-az1, usw1-az3;"
    )
    assert not [w for w in load_settings(dev(), "dev").warnings if "availabilityZoneCount" in w]


def cidrs(count: int) -> str:
    return json.dumps([f"10.{i // 256}.{i % 256}.0/24" for i in range(count)])


def test_more_public_access_cidrs_than_eks_allows_are_refused_in_one_short_line(tmp_path, capsys):
    """50,000 CIDR blocks passed silently (issue 39); EKS takes at most 40 (service-quotas.html)."""
    with pytest.raises(ConfigError) as refused:
        load_settings(dev(apiAllowedCidrs=cidrs(50_000)), "dev")
    line = str(refused.value)
    assert line.startswith('config elastic-training:apiAllowedCidrs=["10.0.0.0/24", ')
    assert (
        "... (50000 items)] is invalid: lists 50000 CIDR blocks; EKS allows at most 40 for the public endpoint" in line
    )
    assert len(line) < 400 and "\n" not in line
    assert load_settings(dev(apiAllowedCidrs=cidrs(40)), "dev").api_allowed_cidrs[-1] == "10.0.39.0/24"
    # Through the command: one line on stderr, exit 2, nothing written.
    out = tmp_path / "out"
    assert infra.cli.synth.main(["dev", "--out", str(out), "-c", f"apiAllowedCidrs={cidrs(41)}"]) == 2
    (printed,) = capsys.readouterr().err.splitlines()
    assert "... (41 items)] is invalid: lists 41 CIDR blocks; EKS allows at most 40" in printed
    assert not out.exists()


def test_a_huge_value_is_cut_in_the_line_saying_how_long_it_was():
    with pytest.raises(ConfigError) as refused:
        load_settings(dev(runId="r" * 100_000), "dev")
    line = str(refused.value)
    assert line.startswith("config elastic-training:runId='rrrr") and "...' (100000 characters) is invalid: " in line
    assert len(line) < 400
    assert show_value(["a", "b"]) == '["a", "b"]' and show_value("run-1") == "'run-1'"


def test_an_admin_arn_listed_twice_is_refused():
    arn = "arn:aws:iam::123456789012:role/admin"
    with pytest.raises(ConfigError) as refused:
        load_settings(dev(clusterAdminArns=json.dumps([arn, "arn:aws:iam::123456789012:user/ops", arn])), "dev")
    assert str(refused.value).endswith(f"is invalid: lists {arn} twice (each ARN is one EKS access entry): keep one")
