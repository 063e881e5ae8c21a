"""Config rules as properties: every bound is tested at the bound and one step past it, every
relation at equality and one past it, and every refusal is the exact line a user reads.
Pure function tests (no synth): scripts/mutation.sh runs them against infra/config/'s mutants."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone

import pytest

from infra import versions
from infra.config import (
    CIFAR10_MD5,
    CLOUDWATCH_LOG_RETENTION_DAYS,
    CONFIG_KEYS,
    KEYS_BY_NAME,
    PROJECT,
    RESERVED_NAMESPACES,
    ConfigError,
    data_md5_for,
    load_settings,
)
from infra.config.keys import _between, _one_of

# A day on which the default Kubernetes version is in standard support: no support warning.
TODAY = date(2026, 11, 25)
BASE = {"aws:region": "us-west-2", f"{PROJECT}:apiAllowedCidrs": '["203.0.113.0/24"]'}


def load(**keys: str):
    return load_settings({**BASE, **{f"{PROJECT}:{k}": v for k, v in keys.items()}}, "test", today=TODAY)


def refusal(**keys: str) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        load(**keys)
    return refused.value


def rule_of(name: str):
    return KEYS_BY_NAME[name].rule


# --- ranges: both ends accepted, one step past either end refused ---------------------------------

RANGE = re.compile(r"must be between (-?\d+) and (-?\d+)")
RANGED = [
    key for key in CONFIG_KEYS if key.type == "integer" and key.rule and RANGE.fullmatch(key.rule(-(10**9)) or "")
]


def test_the_range_table_is_not_empty():
    assert {k.name for k in RANGED} >= {
        "availabilityZoneCount",
        "nodeMaxCount",
        "workers",
        "workerGraceSeconds",
        "checkpointEverySeconds",
        "minWorkers",
        "maxWorkers",
        "maxRestarts",
        "epochs",
        "jobTimeoutMinutes",
    }


@pytest.mark.parametrize("key", RANGED, ids=lambda k: k.name)
def test_every_integer_range_holds_exactly_at_its_ends(key):
    low, high = map(int, RANGE.fullmatch(key.rule(-(10**9))).groups())
    assert low < high
    assert key.rule(low) is None and key.rule(high) is None
    assert key.rule(low - 1) == key.rule(high + 1) == f"must be between {low} and {high}"


@pytest.mark.parametrize("low, high", [(0, 100), (1, 4), (5, 10080)])
def test_a_range_rule_is_closed_at_both_ends(low, high):
    # The rules in CONFIG_KEYS are built at import time: the builders are tested here directly.
    rule = _between(low, high)
    assert rule(low) is None and rule(high) is None and rule((low + high) // 2) is None
    assert rule(low - 1) == rule(high + 1) == f"must be between {low} and {high}"


def test_a_choice_rule_takes_exactly_its_choices():
    rule = _one_of(("1.34", "1.35"))
    assert rule("1.34") is None and rule("1.35") is None
    assert rule("1.3") == rule("1.36") == rule("") == "must be one of 1.34, 1.35"


def test_min_accuracy_is_a_fraction_closed_at_both_ends():
    key = KEYS_BY_NAME["minAccuracy"]
    assert key.rule(0.0) is None and key.rule(1.0) is None
    for outside in (-0.0001, 1.0001):
        assert key.rule(outside) == "must be between 0 and 1 (a fraction: 0.7 means 70 %)"
    assert key.default_value == 0.7 and load().min_accuracy == 0.7
    assert load(minAccuracy="1").min_accuracy == 1.0 and load(minAccuracy="0").min_accuracy == 0.0


def test_kubernetes_version_is_one_of_the_supported_and_nothing_else():
    rule = rule_of("kubernetesVersion")
    for version in versions.SUPPORTED_KUBERNETES_VERSIONS:
        assert rule(version) is None
    # The list names only the versions EKS still creates today (issue 39), and an unquoted 1.40 is named.
    from datetime import datetime, timezone

    today = datetime.now(timezone.utc).date()
    usable = ", ".join(
        v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, today) != versions.ENDED
    )
    assert rule("1.30") == rule("1.36") == f"must be one of {usable}"
    assert rule("1.4") == (
        f"must be one of {usable} (quote the version in the stack file, kubernetesVersion: \"1.40\": "
        "unquoted, YAML reads 1.40 as the number 1.4)"
    )


def test_log_retention_is_exactly_the_cloudwatch_values():
    rule = rule_of("logRetentionDays")
    allowed = {d for d in range(0, 4000) if rule(d) is None}
    assert allowed == set(CLOUDWATCH_LOG_RETENTION_DAYS)
    assert rule(2) == "must be a retention CloudWatch Logs accepts: one of " + ", ".join(
        map(str, CLOUDWATCH_LOG_RETENTION_DAYS)
    )


# --- relations: equality passes, one past refuses, and the message names the breaking key ---------


@pytest.mark.parametrize(
    "smaller, larger, values, refused_key, rule",
    [
        ("minWorkers", "workers", {"nodeMaxCount": "9", "maxWorkers": "9"}, "minWorkers", "must be <= workers ({})"),
        ("workers", "maxWorkers", {"nodeMaxCount": "9", "minWorkers": "1"}, "workers", "must be <= maxWorkers ({})"),
        (
            "maxWorkers",
            "nodeMaxCount",
            {"minWorkers": "1", "workers": "1"},
            "maxWorkers",
            "must be <= nodeMaxCount ({}): each worker takes a whole node",
        ),
    ],
)
def test_every_relation_holds_at_equality_and_breaks_one_past_it(smaller, larger, values, refused_key, rule):
    for n in (1, 3):
        settings = load(**values, **{smaller: str(n), larger: str(n)})
        assert getattr(settings, KEYS_BY_NAME[smaller].field) == getattr(settings, KEYS_BY_NAME[larger].field) == n
    error = refusal(**values, **{smaller: "4", larger: "3"})
    assert (
        str(error)
        == f"config {PROJECT}:{refused_key}={4 if refused_key == smaller else 3} is invalid: {rule.format(3)}"
    )
    assert (error.key, error.value) == (f"{PROJECT}:{refused_key}", 4 if refused_key == smaller else 3)


def test_the_md5_of_synthetic_data_must_be_empty_or_the_default():
    assert load(dataSource="synthetic", dataMd5="").data_md5 == ""
    assert load(dataSource="synthetic:5").data_md5 == CIFAR10_MD5  # the untouched default
    error = refusal(dataSource="synthetic", dataMd5="0" * 32)
    assert str(error) == (
        f"config {PROJECT}:dataMd5={'0' * 32!r} is invalid: must be empty when dataSource is "
        "synthetic (generated data has no fixed checksum)"
    )
    # Any checksum goes with a downloaded tarball.
    assert load(dataSource="https://example.org/c.tgz", dataMd5="0" * 32).data_md5 == "0" * 32


def test_data_prep_verifies_the_default_checksum_on_the_default_source_and_none_on_generated_data():
    assert data_md5_for(load()) == CIFAR10_MD5
    assert data_md5_for(load(dataSource="s3://bucket/cifar.tgz")) == CIFAR10_MD5
    assert data_md5_for(load(dataSource="https://example.org/c.tgz", dataMd5="")) == ""
    assert data_md5_for(load(dataSource="synthetic")) == "" and data_md5_for(load(dataSource="synthetic:3")) == ""


# --- single-value rules: what passes, what fails, the exact text --------------------------------


@pytest.mark.parametrize(
    "name, good, bad, rule",
    [
        (
            "nodeInstanceType",
            [
                "c5.4xlarge",
                "m6id.large",
                "p4d.24xlarge",
                "g5.12xlarge",
                "c6i.4xlarge",
                "t3.micro",
                "p5.48xlarge",
                "p6-b200.48xlarge",
            ],
            ["c5", "large", ""],
            "must be an EC2 instance type such as c5.4xlarge (family, generation, size)",
        ),
        # Graviton types, by what EC2 says of them (ProcessorInfo.SupportedArchitectures: arm64 only).
        (
            "nodeInstanceType",
            [],
            ["c6g.large", "m7gd.xlarge", "c6gn.large", "a1.large"],
            "must be an x86-64 instance type: EC2 lists it as arm64 only (Graviton), and the nodes run the x86-64 EKS AMI "
            "and the training and controller image, built for linux/amd64 only",
        ),
        (
            "workerCpu",
            ["15", "500m", "1.5", "0.1", "1m"],
            ["0", "0m", "0.0", "-1", "1.", "15x", ""],
            "must be a CPU quantity above zero such as 15, 3.5 or 500m (thousandths of a CPU)",
        ),
        # jobs.data.prepare refuses more than MAX_SYNTHETIC_PER_CLASS images per class: so does the config, at 5001.
        (
            "dataSource",
            ["https://h/p.tgz", "s3://b/k", "synthetic", "synthetic:1", "synthetic:5000"],
            [
                "http://h/p.tgz",
                "https://h",
                "s3://b",
                "synthetic:0",
                "synthetic:5001",
                "synthetic:999999",
                "synthetic:",
                "synthetic:05",
                "ftp://h/p",
            ],
            "must be an https:// or s3:// URL of a CIFAR-10 python tarball, 'synthetic' or 'synthetic:<images per class>' "
            "with 1 to 5000 images per class",
        ),
        (
            "dataMd5",
            ["", "0" * 32, "abcdef" + "0" * 26],
            ["0" * 31, "0" * 33, "A" * 32, "g" * 32],
            "must be empty or 32 lowercase hex digits",
        ),
        (
            "apiAllowedCidrs",
            [["0.0.0.0/0"], ["10.0.0.0/8", "203.0.113.0/24"]],
            [[]],
            "must list at least one CIDR block (e.g. your office range, or 0.0.0.0/0)",
        ),
    ],
)
def test_single_value_rules(name, good, bad, rule):
    for value in good:
        assert rule_of(name)(value) is None, value
    for value in bad:
        assert rule_of(name)(value) == rule, value


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("C5.large", "c5.large"),
        ("c5.4xlarge\n", "c5.4xlarge"),
        ("c5.4xlarg", "c5.4xlarge"),
        ("c6.4xlarge", "c6i.4xlarge"),
    ],
)
def test_a_near_miss_gets_did_you_mean(typed, meant):
    line = rule_of("nodeInstanceType")(typed)
    assert line.startswith(f"is not an EC2 instance type offered for Linux; did you mean {meant}"), line


def test_a_well_formed_name_ec2_does_not_offer_says_so_and_where_the_types_come_from():
    line = rule_of("nodeInstanceType")("zz9.huge")
    assert line.startswith(
        "is not an EC2 instance type offered for Linux (the types are those of "
        "infra/aws/data/ec2_shapes.csv (1386 types: EC2 DescribeInstanceTypes as moto 5.2.5 ships it"
    )


def test_cidrs_are_ipv4_networks_with_zero_host_bits_every_one_of_them():
    rule = rule_of("apiAllowedCidrs")
    assert (
        rule(["10.0.0.0/8", "10.0.0.1/24"])
        == "'10.0.0.1/24' is not a CIDR block with its host bits zero, e.g. 203.0.113.0/24"
    )
    assert rule(["10.0.0.0/8", "2001:db8::/32"]) == "'2001:db8::/32' is IPv6; EKS public access CIDRs must be IPv4"


def test_admin_principals_are_role_or_user_arns_and_never_a_group():
    rule = rule_of("clusterAdminArns")
    role, user = "arn:aws:iam::123456789012:role/admins", "arn:aws:iam::123456789012:user/alice"
    assert rule([]) is None and rule([role, user]) is None and rule(["arn:aws-cn:iam::123456789012:role/a/b"]) is None
    for bad in (
        "arn:aws:iam::123456789012:group/admins",
        "arn:aws:iam::12345678901:role/a",
        "arn:aws:sts::123456789012:role/a",
    ):
        assert (
            rule([role, bad]) == f"{bad!r} is not an IAM role or user ARN (arn:aws:iam::<12-digit account>:role/<name>)"
        )


@pytest.mark.parametrize(
    "name, limit",
    [("namespace", 63), ("storageClassName", 253), ("persistentVolumeName", 253), ("pvcName", 253), ("runId", 40)],
)
def test_dns_labels_are_refused_one_character_past_their_limit(name, limit):
    rule = rule_of(name)
    assert rule("a" * limit) is None and rule("a") is None and rule("a-1") is None
    expected = (
        "must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit, "
        f"at most {limit} characters"
    )
    for bad in ("a" * (limit + 1), "-a", "a-", "A", "a_b", "", "a\n"):
        assert rule(bad) == expected, bad


def test_the_workload_namespace_is_none_the_cluster_or_the_controller_owns():
    rule = rule_of("namespace")
    for reserved in RESERVED_NAMESPACES:
        assert (
            rule(reserved)
            == f"must not be one of {', '.join(RESERVED_NAMESPACES)} (the stack creates and labels its own namespace)"
        )
    assert "elastic-job" in RESERVED_NAMESPACES and "kube-system" in RESERVED_NAMESPACES


# --- parsing config text: the exact forms each type takes --------------------------------------


@pytest.mark.parametrize(
    "name, text, value",
    [
        ("nodeMaxCount", "3", 3),
        ("nodeMaxCount", " 3 ", 3),
        ("maxRestarts", "0", 0),
        ("retainData", "true", True),
        ("retainData", "false", False),
        ("minAccuracy", "0.7", 0.7),
        ("minAccuracy", ".5", 0.5),
        ("minAccuracy", "1.", 1.0),
        ("minAccuracy", "1", 1.0),
        ("apiAllowedCidrs", '["10.0.0.0/8"]', ["10.0.0.0/8"]),
        ("clusterAdminArns", "[]", []),
        ("runId", "run-2", "run-2"),
    ],
)
def test_config_text_parses_to_its_value(name, text, value):
    parsed = KEYS_BY_NAME[name].parse_text(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    "name, text, rule",
    [
        ("nodeMaxCount", "3.0", "must be a whole number"),
        ("nodeMaxCount", "three", "must be a whole number"),
        ("nodeMaxCount", "", "must be a whole number"),
        ("retainData", "True", "must be true or false"),
        ("retainData", "yes", "must be true or false"),
        ("minAccuracy", "nan", "must be a decimal number such as 0.7"),
        ("minAccuracy", "1e-1", "must be a decimal number such as 0.7"),
        ("minAccuracy", "0_5", "must be a decimal number such as 0.7"),
        ("minAccuracy", "", "must be a decimal number such as 0.7"),
        ("apiAllowedCidrs", "10.0.0.0/8", 'must be a JSON list of strings, e.g. ["203.0.113.0/24"]'),
        ("apiAllowedCidrs", '"10.0.0.0/8"', 'must be a JSON list of strings, e.g. ["203.0.113.0/24"]'),
        ("apiAllowedCidrs", "[1]", 'must be a JSON list of strings, e.g. ["203.0.113.0/24"]'),
    ],
)
def test_unparsable_text_is_one_line_naming_key_text_and_form(name, text, rule):
    error = refusal(**{name: text})
    assert str(error) == f"config {PROJECT}:{name}={text!r} is invalid: {rule}"
    assert (error.key, error.value, error.rule) == (f"{PROJECT}:{name}", text, rule)


def test_a_value_that_breaks_its_rule_is_shown_as_parsed():
    assert str(refusal(nodeMaxCount="0")) == f"config {PROJECT}:nodeMaxCount=0 is invalid: must be between 1 and 100"
    assert str(refusal(apiAllowedCidrs="[]")).startswith(f"config {PROJECT}:apiAllowedCidrs=[] is invalid: must list")


# --- the whole load ------------------------------------------------------------------------------


def test_region_is_required_and_the_refusal_says_how_to_set_it():
    for raw in ({}, {"aws:region": ""}):
        with pytest.raises(ConfigError) as refused:
            load_settings(raw, "test", today=TODAY)
        assert str(refused.value) == (
            "config aws:region='' is invalid: must be set to an AWS region of the commercial aws "
            "partition such as us-west-2 (pulumi config set aws:region us-west-2)"
        )
    with pytest.raises(ConfigError) as refused:
        load_settings({"aws:region": "cn-north-1"}, "test", today=TODAY)
    assert refused.value.key == "aws:region" and refused.value.value == "cn-north-1"


def test_settings_are_exactly_the_defaults_plus_what_was_set():
    settings = load(workerGraceSeconds="60", workers="3", maxWorkers="3", nodeMaxCount="4")
    assert (settings.project, settings.stack, settings.region) == (PROJECT, "test", "us-west-2")
    assert (settings.worker_grace_seconds, settings.workers, settings.max_workers) == (60, 3, 3)
    for key in CONFIG_KEYS:
        if key.name not in ("workerGraceSeconds", "workers", "maxWorkers", "nodeMaxCount", "apiAllowedCidrs"):
            value = getattr(settings, key.field)
            assert value == (tuple(key.default_value) if key.type == "array" else key.default_value), key.name
    assert settings.api_allowed_cidrs == ("203.0.113.0/24",) and settings.cluster_admin_arns == ()
    assert settings.warnings == ()


def test_the_open_endpoint_warning_appears_exactly_when_0_0_0_0_slash_0_is_listed():
    (warning,) = load(apiAllowedCidrs='["10.0.0.0/8", "0.0.0.0/0"]').warnings
    assert warning == (
        f"config {PROJECT}:apiAllowedCidrs includes 0.0.0.0/0: the Kubernetes API endpoint is reachable "
        "from the whole internet (still authenticated by IAM); list your own ranges to close it"
    )
    assert load(apiAllowedCidrs='["0.0.0.0/1"]').warnings == ()


def test_today_defaults_to_the_utc_date(monkeypatch):
    """The EKS calendar's days are UTC days (tests/config/test_kubernetes_support.py cites it)."""
    import infra.config.settings

    asked = []

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            asked.append(tz)
            return datetime(2027, 3, 27, 1, 0, tzinfo=tz)  # the first UTC day of 1.35's extended support

    monkeypatch.setattr(infra.config.settings, "datetime", Clock)
    (warning,) = load_settings(BASE, "test").warnings
    assert asked == [timezone.utc] and "is in EKS extended support since 2027-03-27" in warning


def test_the_extended_support_warning_lists_exactly_the_versions_in_standard_support():
    support = versions.EKS_SUPPORT["1.31"]
    day = support.end_of_standard
    (warning,) = load_settings({**BASE, f"{PROJECT}:kubernetesVersion": "1.31"}, "t", today=day).warnings
    standard = [
        v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, day) == versions.STANDARD
    ]
    assert len(standard) >= 2 and "1.31" not in standard
    assert warning.endswith(
        f"EKS upgrades it on its own from {support.end_of_extended.isoformat()}; versions in standard "
        f"support: {', '.join(standard)}"
    )
    # When none is left in standard support, it says so.
    last = max(versions.EKS_SUPPORT.values(), key=lambda s: s.end_of_standard)
    (warning,) = load_settings(
        {**BASE, f"{PROJECT}:kubernetesVersion": versions.DEFAULT_KUBERNETES_VERSION}, "t", today=last.end_of_standard
    ).warnings
    assert warning.endswith("; versions in standard support: none")


def test_when_every_version_has_ended_the_refusal_says_the_table_needs_a_newer_one():
    last = max(s.end_of_extended for s in versions.EKS_SUPPORT.values())
    with pytest.raises(ConfigError) as refused:
        load_settings(BASE, "t", today=last)
    assert (
        refused.value.key == f"{PROJECT}:kubernetesVersion"
        and refused.value.value == versions.DEFAULT_KUBERNETES_VERSION
    )
    assert str(refused.value).endswith(
        "(EKS creates no such cluster); must be one of none (infra/versions.py needs a newer version)"
    )


def test_an_unknown_key_names_the_one_closest_key():
    error = refusal(nodeMaxCont="3")
    assert str(error) == f"config {PROJECT}:nodeMaxCont='3' is invalid: unknown key (did you mean nodeMaxCount?)"
    error = refusal(colour="blue")
    assert (
        str(error) == f"config {PROJECT}:colour='blue' is invalid: unknown key (known keys: {', '.join(KEYS_BY_NAME)})"
    )
    # Keys of other namespaces (aws:, pulumi:) are not ours to refuse.
    assert load_settings({**BASE, "aws:profile": "x"}, "t", today=TODAY).region == "us-west-2"


# --- target existing: an image Kubernetes will not re-pull, and no AWS ------------------------------

EXISTING = dict(
    target="existing",
    imageUri="docker.io/library/elastic-training:local",
    storageClassName="standard",
    storageAccessMode="ReadWriteOnce",
    workersPerNode="2",
    workers="2",
    minWorkers="2",
    maxWorkers="2",
    dataSource="synthetic:100",
    dataMd5="",
)


def test_target_existing_loads_with_a_tag_pinned_image():
    assert load(**EXISTING).image_uri == "docker.io/library/elastic-training:local"


@pytest.mark.parametrize(
    "keys, line",
    [
        (
            dict(imageUri=""),
            f"config {PROJECT}:imageUri='' is invalid: must be set with target existing (an image the cluster "
            "can pull, or one loaded with `kind load docker-image`): only target eks builds images/ and pushes "
            "it to ECR",
        ),
        (
            dict(imageUri="docker.io/library/elastic-training:latest"),
            f"config {PROJECT}:imageUri='docker.io/library/elastic-training:latest' is invalid: must name a tag other than "
            "latest, or a digest, with target existing: Kubernetes pulls a :latest or untagged image on every start (pull "
            "policy Always), so an image loaded into kind would never be used",
        ),
        (
            dict(dataSource="s3://datasets/cifar.tgz", dataMd5=""),
            f"config {PROJECT}:dataSource='s3://datasets/cifar.tgz' is invalid: must not be an s3:// URL with target existing "
            "(data-prep reads S3 through an EKS IAM role); use an https:// URL or synthetic",
        ),
        (
            dict(maxWorkers="3"),
            f"config {PROJECT}:workersPerNode=2 is invalid: must be >= maxWorkers (3) with "
            "storageAccessMode ReadWriteOnce: the volume is on one node, so every worker must fit there",
        ),
    ],
)
def test_target_existing_refusals_are_exact_lines(keys, line):
    assert str(refusal(**{**EXISTING, **keys})) == line


@pytest.mark.parametrize(
    "image, pinned",
    [
        ("elastic-training:local", True),
        ("elastic-training", False),
        ("elastic-training:latest", False),
        ("localhost:5000/elastic-training", False),
        ("localhost:5000/elastic-training:1.0", True),
        ("localhost:5000/team/elastic-training:latest", False),
        ("registry.example/a/b/c:v2", True),
        ("elastic-training@sha256:" + "a" * 64, True),
        ("localhost:5000/t@sha256:" + "b" * 64, True),
    ],
)
def test_an_image_is_pinned_by_a_tag_other_than_latest_or_by_a_digest(image, pinned):
    from infra.config import image_pull_policy, pins_the_image

    assert pins_the_image(image) is pinned
    assert image_pull_policy(image) == ("IfNotPresent" if pinned else "Always")


@pytest.mark.parametrize(
    "key, bad, line",
    [
        ("kubeContext", " kind", "must be empty (the current context) or a context name of the kubeconfig"),
        ("kubeContext", "a\nb", "must be empty (the current context) or a context name of the kubeconfig"),
        ("kubeconfig", "", "must be the path of a kubeconfig file, e.g. ~/.kube/config"),
        ("kubeconfig", "~/.kube/a\nb", "must be the path of a kubeconfig file, e.g. ~/.kube/config"),
        ("kubeconfig", "~/.kube/config ", "must be the path of a kubeconfig file, e.g. ~/.kube/config"),
    ],
)
def test_kubeconfig_and_context_refusals_are_exact(key, bad, line):
    rule = rule_of(key)
    assert rule(bad) == line
    assert rule("kind-elastic-training" if key == "kubeContext" else "~/.kube/config") is None
    if key == "kubeContext":
        assert rule("") is None  # the kubeconfig's current context


# --- GPU nodes: the worker fits one node, at every bound -------------------------------------------

GPU = dict(nodeInstanceType="g6.xlarge", workerCpu="3", workerMemory="12Gi")  # 4 vCPUs, 16384 MiB


# g6.xlarge gives pods 3690m and 13944Mi (infra/config/node_fit.py; tests/config/test_node_fit.py).
@pytest.mark.parametrize(
    "keys",
    [
        dict(workerMemory="13944Mi"),
        dict(workerMemory="4096Mi"),
        dict(workerCpu="3690m"),
        dict(workerCpu="3.5"),
        dict(workerMemory="14621343744"),
    ],
)
def test_a_gpu_worker_just_inside_every_bound_is_accepted(keys):
    assert load(**{**GPU, **keys}).node_instance_type == "g6.xlarge"


MEMORY_LINE = (
    "must be at most 13944Mi for 1 worker per node: one g6.xlarge node gives pods 13944Mi of its 16384 MiB "
    "(the kubelet, its eviction threshold and the VM keep 2222Mi, the node's DaemonSets request 218Mi)"
)
CPU_LINE = (
    "must be at most 3690m for 1 worker per node: one g6.xlarge node gives pods 3690m of its 4 vCPUs "
    "(the kubelet keeps 80m, the node's DaemonSets request 230m)"
)


@pytest.mark.parametrize(
    "keys, key, value, rule",
    [
        (dict(workerMemory="13945Mi"), "workerMemory", "'13945Mi'", MEMORY_LINE),
        (dict(workerMemory="14621343745"), "workerMemory", "'14621343745'", MEMORY_LINE),
        (
            dict(workerMemory="4095Mi"),
            "workerMemory",
            "'4095Mi'",
            "must be at least 4096Mi on GPU nodes: half of it is /dev/shm, which NCCL needs 2048Mi of",
        ),
        (dict(workerCpu="3691m"), "workerCpu", "'3691m'", CPU_LINE),
        (dict(workerCpu="4"), "workerCpu", "'4'", CPU_LINE),
        (
            dict(workersPerNode="2", workers="2", maxWorkers="2", nodeMaxCount="2"),
            "workersPerNode",
            "2",
            "must be 1 on GPU nodes: each worker takes every GPU of its node",
        ),
    ],
)
def test_a_gpu_worker_at_or_past_every_bound_is_refused_with_its_line(keys, key, value, rule):
    assert str(refusal(**{**GPU, **keys})) == f"config {PROJECT}:{key}={value} is invalid: {rule}"


def test_memory_quantities_in_mib_for_every_suffix():
    from infra.config import memory_mib

    assert memory_mib("1048576") == 1 and memory_mib("2097152") == 2  # bare: bytes
    assert memory_mib("1048576000m") == 1  # millibytes
    assert memory_mib("1Mi") == 1 and memory_mib("1Gi") == 1024 and memory_mib("1Ki") == 1 / 1024
    assert memory_mib("1M") == 1e6 / 1048576 and memory_mib("1G") == 1e9 / 1048576


def test_only_a_node_with_gpus_makes_a_gpu_stack():
    from infra.config import gpus_per_node, is_gpu_stack

    cpu, one, four = load(), load(**GPU), load(nodeInstanceType="g6.12xlarge", workerMemory="12Gi")
    assert (gpus_per_node(cpu), gpus_per_node(one), gpus_per_node(four)) == (0, 1, 4)
    assert (is_gpu_stack(cpu), is_gpu_stack(one), is_gpu_stack(four)) == (False, True, True)


@pytest.mark.parametrize(
    "key, value, rule",
    [
        (
            "imageVariant",
            "",
            "must be cuda when imageUri is given on a GPU stack (nodeInstanceType g6.xlarge has NVIDIA "
            "GPUs): declare that the image holds a CUDA build of torch",
        ),
    ],
)
def test_a_prebuilt_image_on_gpus_must_declare_cuda(key, value, rule):
    line = str(refusal(**GPU, imageUri="registry.example/trainer@sha256:" + "b" * 64))
    assert line == f"config {PROJECT}:{key}={value!r} is invalid: {rule}"
    assert (
        load(**GPU, imageUri="registry.example/trainer@sha256:" + "b" * 64, imageVariant="cuda").image_variant == "cuda"
    )


@pytest.mark.parametrize(
    "key, bad, line",
    [
        (
            "systemNodeInstanceType",
            "g6.xlarge",
            "must be a CPU instance type such as m5.large (the system nodes are there to keep GPUs free)",
        ),
        (
            "nodeInstanceType",
            "g4ad.xlarge",
            "is a GPU type that is not an x86-64 type with whole NVIDIA GPUs in "
            "infra/aws/gpu_instances.py (fractional-GPU and AMD-GPU types are not supported), "
            "e.g. g6.xlarge or g5.xlarge",
        ),
    ],
)
def test_instance_type_refusals_are_exact(key, bad, line):
    assert rule_of(key)(bad) == line
    assert rule_of(key)("m5.large") is None


@pytest.mark.parametrize("per_node, max_workers, ok", [(2, 6, True), (2, 7, False), (3, 9, True), (3, 10, False)])
def test_max_workers_fit_the_most_nodes_times_workers_per_node_exactly(per_node, max_workers, ok):
    keys = dict(
        nodeMaxCount="3",
        workers="1",
        minWorkers="1",
        workersPerNode=str(per_node),
        maxWorkers=str(max_workers),
        workerCpu="1",
        workerMemory="4Gi",
    )
    if ok:
        assert load(**keys).max_workers == max_workers
    else:
        assert str(refusal(**keys)) == (
            f"config {PROJECT}:maxWorkers={max_workers} is invalid: must be <= nodeMaxCount (3)"
            f" x workersPerNode ({per_node})"
        )


def test_the_image_variant_follows_the_nodes():
    from infra.config import image_variant

    assert image_variant(load()) == "cpu" and image_variant(load(imageVariant="cpu")) == "cpu"
    assert image_variant(load(**GPU)) == "cuda" and image_variant(load(**GPU, imageVariant="cuda")) == "cuda"
