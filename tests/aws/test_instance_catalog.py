"""The EC2 catalog table (infra/aws/data/), its loader (infra/aws/instance_catalog.py), its builder
(infra/aws/catalog_build.py) and the refresh script (scripts/refresh_prices.py).

The sample rows below are in the exact column layout of skypilot-org/skypilot-catalog
`catalogs/v7/aws/vms.csv` (header and rows as read at commit 27f67dd4, upstream-facts-2.md fact 20),
GpuInfo included as the catalog writes it: a quoted Python-literal blob."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import util as import_util
from pathlib import Path

import pytest
import yaml

from infra.aws import catalog_build, instance_catalog
from infra.aws.gpu_instances import NVIDIA_INSTANCES

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = """\
InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone
c5.4xlarge,,,16.0,32.0,,0.68,0.225600,us-west-2,usw2-az1
c5.4xlarge,,,16.0,32.0,,0.68,0.232900,us-west-2,usw2-az2
c5.4xlarge,,,16.0,32.0,,0.68,,ap-south-1,aps1-az2
c5.4xlarge,,,16.0,32.0,,0.68,0.166000,ap-south-1,aps1-az3
g6.xlarge,L4,1.0,4.0,16.0,"{'Gpus': [{'Name': 'L4', 'Manufacturer': 'NVIDIA', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 22888}}], 'TotalGpuMemoryInMiB': 22888}",0.8048,0.381400,us-west-2,usw2-az1
g6.xlarge,L4,1.0,4.0,16.0,"{'Gpus': [{'Name': 'L4', 'Manufacturer': 'NVIDIA', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 22888}}], 'TotalGpuMemoryInMiB': 22888}",0.8048,,us-west-2,usw2-az2
a1.large,,,2.0,4.0,,0.051,0.051000,us-west-2,usw2-az2
"""


def _load_script():
    spec = import_util.spec_from_file_location("refresh_prices", ROOT / "scripts" / "refresh_prices.py")
    module = import_util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the committed table and its loader ---------------------------------------------------------


def test_the_table_names_its_source_and_commit():
    assert (instance_catalog.REPOSITORY, instance_catalog.PATH) == (
        "skypilot-org/skypilot-catalog",
        "catalogs/v7/aws/vms.csv",
    )
    assert len(instance_catalog.COMMIT) == 40 and instance_catalog.READ_ON == "2026-11-24"
    # The stored copy had no commit metadata: no date is recorded, and the note says why.
    assert instance_catalog.COMMIT_DATE is None and "could not be read" in instance_catalog.COMMIT_DATE_NOTE
    assert "27f67dd4" in instance_catalog.source_line()


def test_shapes_and_prices_of_the_dev_node_as_the_catalog_lists_them():
    assert instance_catalog.shape("c5.4xlarge") == instance_catalog.Shape(vcpus=16, memory_gib=32, gpus=0, gpu=None)
    assert instance_catalog.on_demand("c5.4xlarge", "us-west-2").usd == 0.68
    summary, _ = instance_catalog.spot("c5.4xlarge", "us-west-2")
    assert summary.by_zone == {"usw2-az1": 0.2256, "usw2-az2": 0.2329, "usw2-az3": 0.2349, "usw2-az4": 0.2826}
    assert instance_catalog.spot_median("c5.4xlarge", "us-west-2").usd == pytest.approx((0.2329 + 0.2349) / 2)


def test_a_zone_without_a_spot_price_is_left_out_not_zero():
    summary, _ = instance_catalog.spot("g6.xlarge", "us-west-2")  # usw2-az2 has no Spot price in the catalog
    assert set(summary.by_zone) == {"usw2-az1", "usw2-az3", "usw2-az4"} and summary.low > 0


def test_what_the_tables_cannot_price_is_unpriced_with_the_reason():
    # r9g (moto 5.2.5 describes it) is in none of the three tables: newer than all of them.
    absent = instance_catalog.on_demand("r9g.large", "us-east-1")
    assert (
        absent.usd is None and "in none of the price tables" in absent.reason and "refresh_prices.py" in absent.reason
    )
    assert not instance_catalog.listed("r9g.large")
    elsewhere = instance_catalog.on_demand("g6.xlarge", "us-west-1")  # g6 is not offered there
    assert elsewhere.usd is None and "no price table lists g6.xlarge in us-west-1" in elsewhere.reason
    assert instance_catalog.spot_median("g6.xlarge", "us-west-1").usd is None
    assert instance_catalog.shape("m6i.4xlarge") is None  # priced by the region table, not in the zone table


# --- the region-wide tables (issue 39: every type in every region) ------------------------------


@pytest.mark.parametrize("kind", ["c6a.8xlarge", "m7i.4xlarge", "g6.xlarge", "p4d.24xlarge", "m6i.4xlarge"])
def test_every_type_a_newcomer_might_pick_is_priced_in_us_east_1(kind):
    found = instance_catalog.on_demand(kind, "us-east-1")
    assert found.known, found.reason
    summary, why = instance_catalog.spot(kind, "us-east-1")
    assert summary is not None and summary.low > 0, why


def test_us_east_1_on_demand_comes_from_karpenter_and_spot_from_ec2_instances_info():
    # The rows as the modules ship them: Karpenter v1.15.2 zz_generated.pricing_aws.go '"c6a.8xlarge": 1.224000';
    # ec2-instances-info data/instances.json c6a.8xlarge us-east-1 linux spot: five zones, 0.4669 to 0.5153.
    on_demand = instance_catalog.on_demand("c6a.8xlarge", "us-east-1")
    assert on_demand.usd == 1.224 and "karpenter-provider-aws@v1.15.2" in on_demand.source
    assert "generated 2026-07-20 for us-east-1" in on_demand.source and on_demand.read_on == "2026-11-28"
    summary, _ = instance_catalog.spot("c6a.8xlarge", "us-east-1")
    assert summary.by_zone == {} and len(summary.unnamed) == 5 and (summary.low, summary.high) == (0.4669, 0.5153)
    median = instance_catalog.spot_median("c6a.8xlarge", "us-east-1")
    assert (
        "ec2-instances-info" in median.source
        and "zones unnamed" in median.source
        and "median of 5 zones" in median.source
    )


def test_other_regions_come_from_the_region_table():
    found = instance_catalog.on_demand("m7i.4xlarge", "eu-west-1")
    assert found.usd == 0.8988 and "ec2-instances-info@v0.0.0-20250528091325-32acf84f42eb" in found.source
    assert "commit 32acf84f42eb of 2025-05-28" in found.source


def test_the_zone_table_comes_first_where_it_has_the_type():
    assert instance_catalog.on_demand("c5.4xlarge", "us-east-1").source == instance_catalog.source_line()
    assert instance_catalog.spot("c5.4xlarge", "us-west-2")[0].unnamed == ()


def test_a_type_with_on_demand_but_no_spot_says_spot_is_not_priced():
    # m8i (newer than the ec2instances.info copy) has Karpenter's us-east-1 On-Demand price only.
    assert instance_catalog.on_demand("m8i.large", "us-east-1").known
    spot = instance_catalog.spot_median("m8i.large", "us-east-1")
    assert spot.usd is None and "no Spot price for m8i.large in us-east-1" in spot.reason


def test_the_region_tables_name_their_modules_versions_and_dates():
    region = json.loads((catalog_build.DATA_DIR / "ec2_region_prices_source.json").read_text())
    assert (region["module"], region["version"], region["commitPrefix"], region["commitTime"]) == (
        "github.com/cristim/ec2-instances-info",
        "v0.0.0-20250528091325-32acf84f42eb",
        "32acf84f42eb",
        "2025-05-28T09:13:25Z",
    )
    karpenter = json.loads((catalog_build.DATA_DIR / "ec2_on_demand_karpenter_source.json").read_text())
    assert (karpenter["version"], karpenter["generatedAt"], karpenter["generatedFor"]) == (
        "v1.15.2",
        "2026-07-20T13:44:30Z",
        "us-east-1",
    )
    from infra.aws.regions import commercial_regions

    rows = list(__import__("csv").DictReader((catalog_build.DATA_DIR / "ec2_region_prices.csv").open()))
    assert len(rows) == region["rows"] and {r["Region"] for r in rows} <= set(commercial_regions())


def test_the_region_table_builder_reads_the_ec2instances_info_layout():
    from infra.aws import region_prices_build as build

    data = json.dumps(
        [
            {
                "instance_type": "m5.large",
                "pricing": {
                    "us-east-1": {
                        "linux": {"ondemand": "0.096", "spot": ["0.038300", "0.031500"]},
                        "mswin": {"ondemand": "0.188"},
                    },
                    "us-gov-west-1": {"linux": {"ondemand": "0.12"}},
                    "eu-west-1": {"linux": {"ondemand": "0.107"}},
                },
            }
        ]
    ).encode()
    table = build.build_region_table(data, {"us-east-1", "eu-west-1"}, {"module": "m"})
    assert table.rows == [
        {"InstanceType": "m5.large", "Region": "eu-west-1", "OnDemandUsd": "0.107", "SpotUsd": ""},
        {"InstanceType": "m5.large", "Region": "us-east-1", "OnDemandUsd": "0.096", "SpotUsd": "0.0315;0.0383"},
    ]
    assert table.source["withSpot"] == 1
    with pytest.raises(build.SourceError):
        build.build_region_table(b'{"not": "a list"}', {"us-east-1"}, {})


def test_the_karpenter_builder_reads_the_generated_go_map():
    from infra.aws import region_prices_build as build

    text = (
        'package pricing\n\n// generated at 2026-07-20T13:44:30Z for us-east-1\n\n'
        'var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{\n\t// us-east-1\n'
        '\t"us-east-1": {\n\t\t// a1 family\n\t\t"a1.2xlarge": 0.204000, "a1.large": 0.051000,\n\t},\n}\n'
    )
    table = build.build_karpenter_table(text, {})
    assert table.rows == [
        {"InstanceType": "a1.2xlarge", "Region": "us-east-1", "OnDemandUsd": "0.204"},
        {"InstanceType": "a1.large", "Region": "us-east-1", "OnDemandUsd": "0.051"},
    ]
    assert (table.source["generatedAt"], table.source["generatedFor"]) == ("2026-07-20T13:44:30Z", "us-east-1")
    assert build.pseudo_version_commit("v0.0.0-20250528091325-32acf84f42eb") == ("32acf84f42eb", "2025-05-28T09:13:25Z")
    assert build.pseudo_version_commit("v1.15.2") == (None, None)


def test_the_refresh_script_rebuilds_the_region_tables_from_the_go_modules(tmp_path):
    script = _load_script()
    data = json.dumps(
        [
            {
                "instance_type": "c6a.8xlarge",
                "pricing": {"eu-west-1": {"linux": {"ondemand": "1.31328", "spot": ["0.6549", "0.5919"]}}},
            }
        ]
    ).encode()

    def fetch(module, version, path):
        assert (module, version, path) == ("github.com/cristim/ec2-instances-info", "latest", "data/instances.json")
        return data, "v0.0.0-20250528091325-32acf84f42eb", "2025-05-28T09:21:47Z"

    line = script.refresh_region_table("latest", tmp_path, "2026-11-28", fetch=fetch)
    assert "1 types in 1 regions" in line
    assert (tmp_path / "ec2_region_prices.csv").read_text() == (
        "InstanceType,Region,OnDemandUsd,SpotUsd\nc6a.8xlarge,eu-west-1,1.31328,0.5919;0.6549\n"
    )
    source = json.loads((tmp_path / "ec2_region_prices_source.json").read_text())
    assert source["commitPrefix"] == "32acf84f42eb" and source["readOn"] == "2026-11-28" and len(source["sha256"]) == 64


@pytest.mark.parametrize(
    "kind, on_demand, spot_zones",
    [
        # Issue 39: these stacks said "NOT IN THE TOTALS: worker nodes". The rows are the catalog's at the
        # recorded commit (ec2_catalog_source.json), us-west-2: On-Demand $/hour and the zones with a Spot price.
        ("c6i.4xlarge", 0.68, 4),
        ("c7a.4xlarge", 0.82112, 4),
        ("g5.2xlarge", 1.212, 3),
        ("p5.48xlarge", 98.32, 4),
    ],
)
def test_the_types_newcomers_chose_are_priced(kind, on_demand, spot_zones):
    assert instance_catalog.on_demand(kind, "us-west-2").usd == on_demand
    summary, why = instance_catalog.spot(kind, "us-west-2")
    assert summary is not None and len(summary.by_zone) == spot_zones, why
    assert instance_catalog.on_demand(kind, "eu-west-1" if kind != "p5.48xlarge" else "eu-west-2").known


@pytest.mark.parametrize("stack", ["dev", "smoke", "gpu"])
def test_every_stack_node_type_is_carried_and_priced_in_its_region(stack):
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    region = config["aws:region"]
    for key in ("elastic-training:nodeInstanceType", "elastic-training:systemNodeInstanceType"):
        if key in config:
            assert instance_catalog.on_demand(config[key], region).known, (stack, key)
            assert instance_catalog.spot_median(config[key], region).known, (stack, key)


def test_gpu_shapes_agree_with_the_gpu_table():
    for name in instance_catalog.carried():
        gpu = NVIDIA_INSTANCES.get(name)
        if gpu:
            shape = instance_catalog.shape(name)
            assert (shape.vcpus, shape.memory_gib * 1024, shape.gpus) == (gpu.vcpus, gpu.memory_mib, gpu.gpus), name


def test_every_shape_agrees_with_the_ec2_instance_data_moto_ships():
    """A second source (moto 5.2.5 moto/ec2/resources/instance_types.json.gz, DescribeInstanceTypes
    answers) for every carried type: a row copied wrong from the catalog would show here."""
    import moto.ec2

    data = json.loads(gzip.open(Path(moto.ec2.__file__).parent / "resources" / "instance_types.json.gz").read())
    for name in instance_catalog.carried():
        shape, described = instance_catalog.shape(name), data[name]
        assert shape.vcpus == described["VCpuInfo"]["DefaultVCpus"], name
        assert shape.memory_gib * 1024 == described["MemoryInfo"]["SizeInMiB"], name


def test_one_on_demand_price_per_type_and_region_in_the_committed_table():
    rebuilt = catalog_build.build(
        (
            {
                "InstanceType": r["InstanceType"],
                "AcceleratorName": "",
                "AcceleratorCount": "",
                "vCPUs": "1",
                "MemoryGiB": "1",
                "GpuInfo": "",
                "Price": r["OnDemandUsd"],
                "SpotPrice": r["SpotUsd"],
                "Region": r["Region"],
                "AvailabilityZone": r["AvailabilityZone"],
            }
            for r in _committed_price_rows()
        ),
        set(instance_catalog.carried()),
    )
    assert len(rebuilt.prices) == len(_committed_price_rows())


def _committed_price_rows():
    import csv

    return list(csv.DictReader((catalog_build.DATA_DIR / catalog_build.PRICES_FILE).open()))


# --- the builder ------------------------------------------------------------------------------


def test_the_builder_keeps_the_carried_types_sorted_and_written_exactly():
    tables = catalog_build.build(catalog_build.read_catalog(SAMPLE), {"c5.4xlarge", "g6.xlarge"})
    assert tables.shapes == [
        {"InstanceType": "c5.4xlarge", "vCPUs": "16", "MemoryGiB": "32", "GPUs": "0", "GPU": ""},
        {"InstanceType": "g6.xlarge", "vCPUs": "4", "MemoryGiB": "16", "GPUs": "1", "GPU": "L4"},
    ]
    assert [
        (r["InstanceType"], r["Region"], r["AvailabilityZone"], r["OnDemandUsd"], r["SpotUsd"]) for r in tables.prices
    ] == [
        ("c5.4xlarge", "ap-south-1", "aps1-az2", "0.68", ""),
        ("c5.4xlarge", "ap-south-1", "aps1-az3", "0.68", "0.166"),
        ("c5.4xlarge", "us-west-2", "usw2-az1", "0.68", "0.2256"),
        ("c5.4xlarge", "us-west-2", "usw2-az2", "0.68", "0.2329"),
        ("g6.xlarge", "us-west-2", "usw2-az1", "0.8048", "0.3814"),
        ("g6.xlarge", "us-west-2", "usw2-az2", "0.8048", ""),
    ]


def test_the_builder_refuses_another_layout_and_contradictions():
    with pytest.raises(catalog_build.CatalogError, match="not the catalog's vms.csv layout"):
        catalog_build.read_catalog(SAMPLE.replace("SpotPrice,", "Spot,"))
    contradicting = SAMPLE.replace("0.68,0.232900", "0.70,0.232900")
    with pytest.raises(
        catalog_build.CatalogError, match="c5.4xlarge in us-west-2 costs 0.7 On-Demand, another zone 0.68"
    ):
        catalog_build.build(catalog_build.read_catalog(contradicting), {"c5.4xlarge"})


# --- the refresh script -----------------------------------------------------------------------


def _stacks(tmp_path: Path) -> Path:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.x.yaml").write_text("config:\n  elastic-training:nodeInstanceType: c5.4xlarge\n")
    return stacks


def test_refresh_from_a_local_copy_writes_the_tables_and_says_what_moved(tmp_path, capsys):
    script, data, stacks = _load_script(), tmp_path / "data", _stacks(tmp_path)
    (tmp_path / "vms.csv").write_text(SAMPLE)
    assert (
        script.main(
            [
                "--csv",
                str(tmp_path / "vms.csv"),
                "--commit",
                "a" * 40,
                "--commit-date",
                "2026-11-20",
                "--data-dir",
                str(data),
                "--stacks-dir",
                str(stacks),
            ]
        )
        == 0
    )
    carried = {row.split(",")[0] for row in (data / "ec2_instances.csv").read_text().splitlines()[1:]}
    assert carried == {"c5.4xlarge", "g6.xlarge"}  # the stack's type and a GPU-table type; a1.large is neither
    source = json.loads((data / "ec2_catalog_source.json").read_text())
    assert (source["commit"], source["commitDate"], source["rows"]) == ("a" * 40, "2026-11-20", 6)
    assert "added c5.4xlarge" in capsys.readouterr().out

    (tmp_path / "vms.csv").write_text(SAMPLE.replace(",0.68,", ",0.70,"))
    assert (
        script.main(
            [
                "--csv",
                str(tmp_path / "vms.csv"),
                "--commit",
                "b" * 40,
                "--data-dir",
                str(data),
                "--stacks-dir",
                str(stacks),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "c5.4xlarge in us-west-2: On-Demand $0.68 -> $0.7" in out and "added" not in out


def test_refresh_with_all_carries_every_type_of_the_copy(tmp_path, capsys):
    """Issue 39: every instance type, not the stacks' few (`--from-github --all` where GitHub is reachable)."""
    script, data, stacks = _load_script(), tmp_path / "data", _stacks(tmp_path)
    (tmp_path / "vms.csv").write_text(SAMPLE)
    assert (
        script.main(
            [
                "--csv",
                str(tmp_path / "vms.csv"),
                "--commit",
                "a" * 40,
                "--all",
                "--data-dir",
                str(data),
                "--stacks-dir",
                str(stacks),
            ]
        )
        == 0
    )
    carried = {row.split(",")[0] for row in (data / "ec2_instances.csv").read_text().splitlines()[1:]}
    assert carried == {line.split(",")[0] for line in SAMPLE.splitlines()[1:] if line}
    assert "a1.large" in carried


def test_refresh_needs_the_commit_of_a_local_copy(tmp_path, capsys):
    (tmp_path / "vms.csv").write_text(SAMPLE)
    with pytest.raises(SystemExit):
        _load_script().main(["--csv", str(tmp_path / "vms.csv"), "--data-dir", str(tmp_path / "data")])
    assert "--csv needs --commit" in capsys.readouterr().err


def test_refresh_from_github_takes_the_newest_commit_and_its_date(tmp_path):
    """GitHub answered by a local server: "List commits" returns [{"sha", "commit": {"committer": {"date"}}}]
    (docs.github.com/en/rest/commits/commits; octocrab src/models/repos.rs RepoCommit mirrors it)."""
    sha, seen = "c" * 40, []

    class GitHub(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            if self.path.startswith("/repos/skypilot-org/skypilot-catalog/commits?"):
                body = json.dumps([{"sha": sha, "commit": {"committer": {"date": "2026-11-23T14:00:07Z"}}}]).encode()
            elif self.path == f"/skypilot-org/skypilot-catalog/{sha}/catalogs/v7/aws/vms.csv":
                body = SAMPLE.encode()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), GitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert (
            _load_script().main(
                [
                    "--from-github",
                    "--github-api",
                    base,
                    "--github-raw",
                    base,
                    "--data-dir",
                    str(tmp_path / "data"),
                    "--stacks-dir",
                    str(_stacks(tmp_path)),
                ]
            )
            == 0
        )
    finally:
        server.shutdown()
    source = json.loads((tmp_path / "data" / "ec2_catalog_source.json").read_text())
    assert (source["commit"], source["commitDate"]) == (sha, "2026-11-23")
    assert "path=catalogs%2Fv7%2Faws%2Fvms.csv" in seen[0] and "per_page=1" in seen[0]
