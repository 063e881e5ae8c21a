"""`elastic-training preflight` against stand-ins for AWS built from AWS's own data and models.

- STS and EC2 are moto's server (`moto_server`, from the installed moto[server] 5.2.5) on a free
  127.0.0.1 port, reached ONLY through AWS_ENDPOINT_URL with boto3's default session, as a user's
  environment would point it (upstream-facts.md fact 20). Its regions, zones, offerings and
  instance types come from moto's AWS-derived data files (fact 19): us-west-2 has zones a-d and
  offers c5.4xlarge, g6.xlarge and p5.4xlarge in each; ap-east-1 is `not-opted-in`; us-west-1 has
  two zones; ca-central-1 offers c8id.4xlarge in ca-central-1a but not ca-central-1b; us-west-1
  does not offer c5ad.4xlarge at all.
- What moto lacks (fact 19: Service Quotas for ec2, the Price List API, EKS cluster and add-on
  versions) is `botocore.stub.Stubber` on the same default-session clients; Stubber checks every
  request and response against botocore's service model (botocore 1.44.5: service-quotas
  GetServiceQuota, pricing GetProducts, eks DescribeClusterVersions/DescribeAddonVersions), so a
  field we invent fails here.
- The "not implemented" scenario leaves EKS and the Price List unstubbed: moto's server itself
  answers those calls with an error page, which is what an endpoint without them does.

Each scenario lists the status it expects for every check; the table is the contract.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto_server import running_moto_server
from botocore.stub import Stubber

from price_list_answers import queue, world
from infra import versions
from infra.cli import preflight as preflight

ROOT = Path(__file__).resolve().parents[2]
TODAY = date(2026, 11, 22)  # 1.35 in standard support (infra/versions.py)
IDS = preflight.CHECK_IDS


# --- moto's server --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_url():
    with running_moto_server() as url:
        yield url


def reset(moto_url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10).close()


@pytest.fixture
def aws_env(moto_url, monkeypatch, tmp_path):
    """A user's environment pointing boto3 at the endpoint: test keys, no profile, no instance metadata."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return moto_url


# --- local tools: stand-ins that print what the real ones print ---------------------------------------


@pytest.fixture
def tools(tmp_path):
    """`pulumi version` prints `v<semver>`, `aws --version` prints `aws-cli/<version> Python/...`,
    `docker buildx version` prints `github.com/docker/buildx v<version> <commit>`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    outputs = {
        "pulumi": "v3.272.0",
        "aws": "aws-cli/2.27.0 Python/3.13.3 Linux/6.8.0 exe/x86_64.ubuntu.24",
        "docker": "github.com/docker/buildx v0.24.0 d0e5e86",
    }
    for name, text in outputs.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\necho '{text}'\n")
        path.chmod(0o755)
    return lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None


# --- the stubbed services -------------------------------------------------------------------------------


def quota(code: str, value: float, name: str) -> dict[str, Any]:
    return {
        "Quota": {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:us-west-2:123456789012:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": name,
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }
    }


STANDARD = ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances")
G_VT = ("L-DB2E81BA", "Running On-Demand G and VT instances")
P = ("L-417A185B", "Running On-Demand P instances")
EIP = ("L-0263D0A3", "EC2-VPC Elastic IPs")


def cluster_version(version: str, status: str) -> dict[str, Any]:
    return {
        "clusterVersions": [
            {
                "clusterVersion": version,
                "clusterType": "eks",
                "status": status,
                "versionStatus": status.upper().replace("-", "_"),
                "endOfStandardSupportDate": datetime(2027, 3, 27, tzinfo=timezone.utc),
            }
        ]
    }


def addon(name: str, version: str, offered: list[str]) -> dict[str, Any]:
    return (
        {
            "addons": [
                {
                    "addonName": name,
                    "type": "storage",
                    "addonVersions": [
                        {
                            "addonVersion": v,
                            "architecture": ["amd64"],
                            "compatibilities": [{"clusterVersion": version, "defaultVersion": i == 0}],
                        }
                        for i, v in enumerate(offered)
                    ],
                }
            ]
        }
        if offered
        else {"addons": []}
    )


def price_list(instance_type: str, region: str, usd: str) -> dict[str, Any]:
    """One EC2 product as the Price List API returns it: a JSON document per product (PriceList items are
    strings in botocore's pricing model, shape SynthesizedJsonPriceListJsonItem)."""
    product = {
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type,
                "regionCode": region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
            },
        },
        "terms": {
            "OnDemand": {
                "SKU.TERM": {
                    "priceDimensions": {
                        "SKU.TERM.RATE": {"unit": "Hrs", "pricePerUnit": {"USD": usd}, "description": "test answer"}
                    }
                }
            }
        },
    }
    return {"FormatVersion": "aws_v1", "PriceList": [json.dumps(product)]}


@dataclass
class Scenario:
    name: str
    expected: dict[str, str]  # check id -> pass/warn/fail/skip
    overrides: tuple[str, ...] = ()
    quotas: list[tuple[tuple[str, str], Any]] = field(default_factory=list)  # in call order; value or error code
    cluster: str | None = "standard-support"  # None: leave EKS unstubbed
    addons: dict[str, list[str]] | None = None
    prices: str | None = "1.2345"  # the stubbed Price List answer; None: unstubbed
    credentials: bool = True
    elastic_ips_in_use: int = 0
    message: dict[str, str] = field(default_factory=dict)  # check id -> text its message must contain


def statuses(**given: str) -> dict[str, str]:
    # The scenarios run on-demand stacks, whose workers buy no Spot capacity (tests/cli/test_preflight_spot.py).
    base = {i: "pass" for i in IDS} | {"spot-market": "skip", "spot-role": "skip"}
    base.update({k.replace("_", "-"): v for k, v in given.items()})
    return base


LAST = dict(versions.OFFLINE_ADDON_VERSIONS)
ALL_ADDONS = {name: [v] for name, v in LAST.items()}
# dev: nodeMaxCount 4 x c5.4xlarge (16 vCPUs) + systemNodeCount 2 x m5.large (2 vCPUs) = 68, both Standard
OK_QUOTAS = [(STANDARD, 68.0), (EIP, 5.0)]

SCENARIOS = [
    Scenario(
        "everything-fine",
        statuses(),
        quotas=OK_QUOTAS,
        message={"zones": "us-west-2a, us-west-2b", "vcpu-quota": "= 68"},
    ),
    Scenario(
        "no-credentials",
        statuses(
            credentials="fail",
            region="skip",
            zones="skip",
            instance_type="skip",
            vcpu_quota="skip",
            elastic_ip_quota="skip",
            kubernetes_version="skip",
            addon_versions="skip",
        ),
        credentials=False,
        cluster=None,
        prices=None,
        message={"credentials": "no AWS credentials"},
    ),
    Scenario(
        "region-not-enabled",
        statuses(region="fail", zones="skip", instance_type="skip", vcpu_quota="skip", elastic_ip_quota="skip"),
        overrides=("aws:region=ap-east-1",),
        message={"region": "not-opted-in"},
    ),
    Scenario(
        "too-few-zones",
        statuses(zones="fail", instance_type="skip"),
        overrides=("aws:region=us-west-1", "availabilityZoneCount=3"),
        quotas=OK_QUOTAS,
        message={"zones": "has 2 available standard zones"},
    ),
    Scenario(
        "type-not-in-one-chosen-zone",
        statuses(instance_type="fail"),
        overrides=("aws:region=ca-central-1", "nodeInstanceType=c8id.4xlarge"),
        quotas=OK_QUOTAS,
        message={"instance-type": "not offered in ca-central-1b; it is offered in ca-central-1a"},
    ),
    Scenario(
        "type-not-in-region",
        statuses(instance_type="fail"),
        overrides=("aws:region=us-west-1", "nodeInstanceType=c5ad.4xlarge"),
        quotas=OK_QUOTAS,
        message={"instance-type": "not offered in any zone of us-west-1"},
    ),
    Scenario(
        "vcpu-quota-standard-too-small",
        statuses(vcpu_quota="fail"),
        quotas=[(STANDARD, 32.0), (EIP, 5.0)],
        message={"vcpu-quota": "needs 68"},
    ),
    Scenario(
        "vcpu-quota-g-family-zero",
        statuses(vcpu_quota="fail"),
        overrides=("nodeInstanceType=g6.xlarge", "workerCpu=3", "workerMemory=12Gi"),
        quotas=[(G_VT, 0.0), (STANDARD, 68.0), (EIP, 5.0)],
        message={"vcpu-quota": "L-DB2E81BA"},
    ),
    Scenario(
        "vcpu-quota-p-family-zero",
        statuses(vcpu_quota="fail"),
        overrides=("nodeInstanceType=p5.4xlarge",),
        quotas=[(P, 0.0), (STANDARD, 68.0), (EIP, 5.0)],
        message={"vcpu-quota": "L-417A185B"},
    ),
    Scenario(
        "no-free-elastic-ip",
        statuses(elastic_ip_quota="fail"),
        quotas=OK_QUOTAS,
        elastic_ips_in_use=5,
        message={"elastic-ip-quota": "5 of 5"},
    ),
    Scenario(
        "version-in-extended-support",
        statuses(kubernetes_version="warn"),
        quotas=OK_QUOTAS,
        cluster="extended-support",
        message={"kubernetes-version": "$0.60/hour instead of $0.10/hour"},
    ),
    Scenario(
        "version-unsupported",
        statuses(kubernetes_version="fail"),
        quotas=OK_QUOTAS,
        cluster="unsupported",
        message={"kubernetes-version": "creates no cluster"},
    ),
    Scenario(
        "addon-version-not-offered",
        statuses(addon_versions="fail"),
        quotas=OK_QUOTAS,
        addons={**ALL_ADDONS, versions.EFS_CSI_ADDON: []},
        message={"addon-versions": "aws-efs-csi-driver: no version offered"},
    ),
    Scenario(
        "last-run-addon-version-gone",
        statuses(addon_versions="warn"),
        quotas=OK_QUOTAS,
        addons={**ALL_ADDONS, versions.EFS_CSI_ADDON: ["v9.9.9-eksbuild.1"]},
        message={"addon-versions": "v9.9.9-eksbuild.1"},
    ),
    Scenario(
        "access-denied-on-one-call",
        statuses(vcpu_quota="warn"),
        quotas=[(STANDARD, "AccessDeniedException"), (EIP, 5.0)],
        message={"vcpu-quota": "could not check: service-quotas get_service_quota: AccessDeniedException"},
    ),
    Scenario(
        "endpoint-does-not-implement-a-call",
        statuses(kubernetes_version="warn", addon_versions="warn"),
        quotas=OK_QUOTAS,
        cluster=None,
        prices=None,
        message={
            "kubernetes-version": "could not check: eks describe_cluster_versions",
            "addon-versions": "could not check: eks describe_addon_versions",
        },
    ),
]


def stubbed_world(scenario: Scenario, settings_region: str, stubbers: list[Stubber]):
    """make_client for preflight: boto3's default-session clients; Stubber on the services moto lacks."""

    def make(service: str, region: str):
        client = preflight.default_client(service, region)
        stubber = Stubber(client)
        if service == "service-quotas":
            for (code, name), value in scenario.quotas:
                params = {"ServiceCode": "ec2", "QuotaCode": code}
                if isinstance(value, str):
                    stubber.add_client_error(
                        "get_service_quota",
                        service_error_code=value,
                        http_status_code=400,
                        service_message="User is not authorized",
                        expected_params=params,
                    )
                else:
                    stubber.add_response("get_service_quota", quota(code, value, name), params)
        elif service == "eks" and scenario.cluster is not None:
            version = versions.DEFAULT_KUBERNETES_VERSION
            stubber.add_response(
                "describe_cluster_versions",
                cluster_version(version, scenario.cluster),
                {"clusterVersions": [version], "includeAll": True},
            )
            for name, offered in (scenario.addons or ALL_ADDONS).items():
                stubber.add_response(
                    "describe_addon_versions",
                    addon(name, version, offered),
                    {"kubernetesVersion": version, "addonName": name},
                )
        elif service == "pricing" and scenario.prices is not None:
            if scenario.cluster == "extended-support":
                # The Kubernetes-version check prices extended support from the Price List API first
                # (infra/cli/preflight/eks_versions.py): the other items' queries come before the nodes'.
                queue(stubber, world(settings_region, *["USW2-"] * 6), settings_region)
            stubber.add_response("get_products", price_list("x", settings_region, scenario.prices), None)
        else:
            return client
        stubber.activate()
        stubbers.append(stubber)
        return client

    return make


def run_scenario(scenario: Scenario, tools, capsys, monkeypatch, moto_url) -> tuple[int, dict[str, Any], float]:
    if not scenario.credentials:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        # boto3's default session keeps the credentials it found; a new one reads this environment.
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    region = next((o.split("=", 1)[1] for o in scenario.overrides if o.startswith("aws:region=")), "us-west-2")
    if scenario.elastic_ips_in_use:
        ec2 = boto3.client("ec2", region_name=region)  # setting up the world, through the same endpoint
        for _ in range(scenario.elastic_ips_in_use):
            ec2.allocate_address(Domain="vpc")
    stubbers: list[Stubber] = []
    argv = ["dev", "--json", *[arg for o in scenario.overrides for arg in ("-c", o)]]
    started = time.perf_counter()
    try:
        code = preflight.main(argv, make_client=stubbed_world(scenario, region, stubbers), today=TODAY, which=tools)
    finally:
        if scenario.elastic_ips_in_use:
            reset(moto_url)  # the addresses would change every later scenario's world
    elapsed = time.perf_counter() - started
    for stubber in stubbers:
        stubber.assert_no_pending_responses()  # every stubbed answer was asked for, in order
    out, err = capsys.readouterr()
    assert err == "", err
    return code, json.loads(out), elapsed


def test_the_table_covers_the_issue():
    names = {s.name for s in SCENARIOS}
    assert len(SCENARIOS) >= 12
    for needed in (
        "everything-fine",
        "no-credentials",
        "region-not-enabled",
        "too-few-zones",
        "type-not-in-one-chosen-zone",
        "type-not-in-region",
        "vcpu-quota-standard-too-small",
        "vcpu-quota-g-family-zero",
        "no-free-elastic-ip",
        "version-in-extended-support",
        "version-unsupported",
        "addon-version-not-offered",
        "access-denied-on-one-call",
        "endpoint-does-not-implement-a-call",
    ):
        assert needed in names


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario, aws_env, tools, capsys, monkeypatch):
    code, report, elapsed = run_scenario(scenario, tools, capsys, monkeypatch, aws_env)
    # "in seconds, before anything is created": a preflight that hangs on a retrying endpoint fails here.
    assert elapsed < 20, f"preflight took {elapsed:.1f} s"
    got = {check["id"]: check["status"] for check in report["checks"]}
    assert [c["id"] for c in report["checks"]] == list(IDS)
    assert got == scenario.expected, json.dumps(report["checks"], indent=1)
    for check_id, text in scenario.message.items():
        message = next(c["message"] for c in report["checks"] if c["id"] == check_id)
        assert text in message, message
    # A check that could not run is not a pass (issue 39): exit 3 when nothing failed but some were not checked.
    unchecked = any(c["message"].startswith("could not check") for c in report["checks"])
    assert code == (1 if "fail" in got.values() else 3 if unchecked else 0)
    assert set(report) == {"stack", "region", "checks", "cost"}
    assert report["cost"]["hourlyUsd"] == pytest.approx(sum(i["hourlyUsd"] or 0 for i in report["cost"]["items"]))
    cost = report["cost"]
    nodes = next(i for i in cost["items"] if i["what"].startswith("worker nodes while a run trains:"))
    if scenario.prices is not None:  # the stubbed Price List answer prices the nodes, and the cost says so
        assert cost["pricesFrom"].startswith("AWS Price List API"), cost["pricesFrom"]
        assert nodes["unitUsd"] == float(scenario.prices) and nodes["runHourlyUsd"] == pytest.approx(
            2 * nodes["unitUsd"]
        )
        assert nodes["hourlyUsd"] == 0  # no worker node between runs (Karpenter's pool, infra/components/capacity.py)
    else:  # no credentials, or an endpoint without the Price List: the offline table, and it says so
        assert cost["pricesFrom"].startswith("EC2 from skypilot-org/skypilot-catalog"), cost["pricesFrom"]
        assert nodes["source"].startswith("skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv @ ")
    control_plane = cost["items"][0]
    if report["region"] in ("us-west-2", "us-east-1"):  # the regions infra/aws/prices.py records
        assert control_plane["unitUsd"] == (0.60 if scenario.cluster == "extended-support" else 0.10)
    else:  # a region with no recorded price: unpriced and named, never zero
        assert control_plane["unitUsd"] is None and control_plane["what"] in cost["unpriced"]


def test_local_tools_missing_or_too_old(aws_env, tmp_path, capsys, monkeypatch):
    bin_dir = tmp_path / "old"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\necho v3.100.0\n")
    (bin_dir / "aws").write_text("#!/bin/sh\necho 'aws-cli/1.45.11 Python/3.11.2 Linux/6.1.0 botocore/1.44.5' >&2\n")
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    scenario = Scenario("old-tools", statuses(local_tools="fail"), quotas=OK_QUOTAS)
    which = lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None  # noqa: E731
    _, report, _ = run_scenario(scenario, which, capsys, monkeypatch, aws_env)
    message = next(c["message"] for c in report["checks"] if c["id"] == "local-tools")
    assert "older than the SDK pin" in message and "docker with buildx" in message and "aws-cli/1.45.11" in message


@pytest.mark.parametrize(
    "argv, text",
    [
        (["dev", "-c", "nodeMaxCount=0"], "config elastic-training:nodeMaxCount=0 is invalid"),
        (["nosuchstack"], "no stack file stacks/Pulumi.nosuchstack.yaml"),
        (["dev", "--colour"], "unrecognized arguments: --colour"),
        (["dev", "-c", "nodeMaxCount"], "must be KEY=VALUE"),
    ],
)
def test_bad_config_or_usage_is_one_line_and_exit_2(argv, text, capsys):
    assert preflight.main(argv, make_client=lambda *_: pytest.fail("no AWS call on bad input")) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and text in err


def test_the_table_output_has_one_line_per_check_and_the_fix(aws_env, tools, capsys):
    scenario = next(s for s in SCENARIOS if s.name == "vcpu-quota-standard-too-small")
    argv = ["dev"]
    code = preflight.main(argv, make_client=stubbed_world(scenario, "us-west-2", []), today=TODAY, which=tools)
    out = capsys.readouterr().out
    assert code == 1
    for check_id in IDS:
        assert any(
            line.split()[1:2] == [check_id] for line in out.splitlines() if line[:4] in ("PASS", "WARN", "FAIL", "SKIP")
        )
    assert (
        "fix: request 68: `aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-1216C47A"
        in out
    )


IAM_PREFIX = {"ec2": "ec2", "service-quotas": "servicequotas", "eks": "eks", "pricing": "pricing"}


def test_readme_preview_policy_allows_every_call_preflight_makes(aws_env, tools, capsys, monkeypatch):
    """The calls are recorded from a real run (botocore's provide-client-params event on every client), not listed by hand."""
    calls: set[tuple[str, str]] = set()
    scenario = SCENARIOS[0]
    stubbers: list[Stubber] = []
    world = stubbed_world(scenario, "us-west-2", stubbers)

    def recording(service: str, region: str):
        client = world(service, region)
        client.meta.events.register("provide-client-params.*.*", lambda model, **_: calls.add((service, model.name)))
        return client

    assert preflight.main(["dev", "--json"], make_client=recording, today=TODAY, which=tools) == 0
    capsys.readouterr()
    readme = (ROOT / "docs" / "ci.md").read_text()
    policy = json.loads(
        re.search(
            r'```json\n(\{\n  "Version": "2012-10-17",\n  "Statement": \[\n    \{\n      "Sid": "PulumiStateList".*?)```',
            readme,
            re.DOTALL,
        ).group(1)
    )
    allowed = {
        action
        for statement in policy["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    made = {f"{IAM_PREFIX[service]}:{operation}" for service, operation in calls if service != "sts"}
    assert {
        "ec2:DescribeInstanceTypeOfferings",
        "servicequotas:GetServiceQuota",
        "eks:DescribeClusterVersions",
        "pricing:GetProducts",
    } <= made
    assert made - allowed == set(), "add these read-only actions to the preview policy of docs/ci.md (Sid Preflight)"


def test_markdown_is_one_table_row_per_check_and_the_cost(aws_env, tools, capsys):
    scenario = SCENARIOS[0]
    assert (
        preflight.main(
            ["dev", "--markdown"], make_client=stubbed_world(scenario, "us-west-2", []), today=TODAY, which=tools
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(IDS)
    assert "**Cost:**" in out and "| NAT gateway | $0.045/NAT-gateway-hour | $0.045/hour | cloudpipelines" in out
    assert out.splitlines()[-1] == "**preflight: every check ran and nothing failed**"
    # The stack's warnings are there too (the table prints them under its header).
    assert "Warning: config elastic-training:apiAllowedCidrs includes 0.0.0.0/0" in out


def test_a_stack_of_target_existing_asks_aws_nothing(tmp_path, capsys, monkeypatch):
    """`local` creates nothing in AWS: every AWS check is SKIP without one client being made, the
    cost is 0 with its note, and only pulumi is needed on the machine (imageUri is required there)."""
    from infra.cli import preflight as preflight

    def no_aws(service, region):
        raise AssertionError(f"preflight made an AWS client ({service}, {region}) for target existing")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\necho v3.272.0\n")
    (bin_dir / "pulumi").chmod(0o755)
    which = lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None  # noqa: E731
    assert preflight.main(["local", "--json"], make_client=no_aws, which=which) == 0
    report = json.loads(capsys.readouterr().out)
    statuses_by_id = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses_by_id.pop("local-tools") == "pass" and set(statuses_by_id.values()) == {"skip"}
    assert report["cost"]["hourlyUsd"] == 0.0 and "not eks" in report["cost"]["note"]


@pytest.mark.parametrize(
    "output, first_line",
    [
        ([], "preflight elastic-training/local on an existing cluster (target existing: no AWS region)"),
        (["--markdown"], "### preflight of `local` on an existing cluster (target existing: no AWS region)"),
    ],
)
def test_the_header_of_a_stack_without_a_region_says_where_it_runs(tmp_path, capsys, output, first_line):
    """`preflight local` once printed "preflight elastic-training/local in " (issue 30, item 7)."""
    (tmp_path / "pulumi").write_text("#!/bin/sh\necho v3.272.0\n")
    (tmp_path / "pulumi").chmod(0o755)
    which = lambda name: str(tmp_path / name) if (tmp_path / name).exists() else None  # noqa: E731
    assert preflight.main(["local", *output], make_client=lambda *_: pytest.fail("no AWS call"), which=which) == 0
    assert capsys.readouterr().out.splitlines()[0] == first_line
