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
    assert (instance_catalog.REPOSITORY, instance_catalog.PATH) == ("skypilot-org/skypilot-catalog", "catalogs/v7/aws/vms.csv")
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
    summary, _ = instance_catalog.spot("g6.xlarge", "us-west-2")   # usw2-az2 has no Spot price in the catalog
    assert set(summary.by_zone) == {"usw2-az1", "usw2-az3", "usw2-az4"} and summary.low > 0


def test_what_the_table_cannot_price_is_unpriced_with_the_reason():
    absent = instance_catalog.on_demand("m6i.4xlarge", "us-west-2")
    assert absent.usd is None and "scripts/refresh_prices.py --add m6i.4xlarge" in absent.reason
    elsewhere = instance_catalog.on_demand("g6.xlarge", "us-west-1")   # g6 is not offered there
    assert elsewhere.usd is None and "no g6.xlarge in us-west-1" in elsewhere.reason
    assert instance_catalog.spot_median("g6.xlarge", "us-west-1").usd is None
    assert instance_catalog.shape("m6i.4xlarge") is None


@pytest.mark.parametrize("kind, on_demand, spot_zones", [
    # Issue 39: these stacks said "NOT IN THE TOTALS: worker nodes". The rows are the catalog's at the
    # recorded commit (ec2_catalog_source.json), us-west-2: On-Demand $/hour and the zones with a Spot price.
    ("c6i.4xlarge", 0.68, 4), ("c7a.4xlarge", 0.82112, 4), ("g5.2xlarge", 1.212, 3), ("p5.48xlarge", 98.32, 4)])
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
        ({"InstanceType": r["InstanceType"], "AcceleratorName": "", "AcceleratorCount": "", "vCPUs": "1",
          "MemoryGiB": "1", "GpuInfo": "", "Price": r["OnDemandUsd"], "SpotPrice": r["SpotUsd"],
          "Region": r["Region"], "AvailabilityZone": r["AvailabilityZone"]}
         for r in _committed_price_rows()), set(instance_catalog.carried()))
    assert len(rebuilt.prices) == len(_committed_price_rows())


def _committed_price_rows():
    import csv
    return list(csv.DictReader((catalog_build.DATA_DIR / catalog_build.PRICES_FILE).open()))


# --- the builder ------------------------------------------------------------------------------

def test_the_builder_keeps_the_carried_types_sorted_and_written_exactly():
    tables = catalog_build.build(catalog_build.read_catalog(SAMPLE), {"c5.4xlarge", "g6.xlarge"})
    assert tables.shapes == [
        {"InstanceType": "c5.4xlarge", "vCPUs": "16", "MemoryGiB": "32", "GPUs": "0", "GPU": ""},
        {"InstanceType": "g6.xlarge", "vCPUs": "4", "MemoryGiB": "16", "GPUs": "1", "GPU": "L4"}]
    assert [(r["InstanceType"], r["Region"], r["AvailabilityZone"], r["OnDemandUsd"], r["SpotUsd"]) for r in tables.prices] == [
        ("c5.4xlarge", "ap-south-1", "aps1-az2", "0.68", ""),
        ("c5.4xlarge", "ap-south-1", "aps1-az3", "0.68", "0.166"),
        ("c5.4xlarge", "us-west-2", "usw2-az1", "0.68", "0.2256"),
        ("c5.4xlarge", "us-west-2", "usw2-az2", "0.68", "0.2329"),
        ("g6.xlarge", "us-west-2", "usw2-az1", "0.8048", "0.3814"),
        ("g6.xlarge", "us-west-2", "usw2-az2", "0.8048", "")]


def test_the_builder_refuses_another_layout_and_contradictions():
    with pytest.raises(catalog_build.CatalogError, match="not the catalog's vms.csv layout"):
        catalog_build.read_catalog(SAMPLE.replace("SpotPrice,", "Spot,"))
    contradicting = SAMPLE.replace("0.68,0.232900", "0.70,0.232900")
    with pytest.raises(catalog_build.CatalogError, match="c5.4xlarge in us-west-2 costs 0.7 On-Demand, another zone 0.68"):
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
    assert script.main(["--csv", str(tmp_path / "vms.csv"), "--commit", "a" * 40, "--commit-date", "2026-11-20",
                        "--data-dir", str(data), "--stacks-dir", str(stacks)]) == 0
    carried = {row.split(",")[0] for row in (data / "ec2_instances.csv").read_text().splitlines()[1:]}
    assert carried == {"c5.4xlarge", "g6.xlarge"}   # the stack's type and a GPU-table type; a1.large is neither
    source = json.loads((data / "ec2_catalog_source.json").read_text())
    assert (source["commit"], source["commitDate"], source["rows"]) == ("a" * 40, "2026-11-20", 6)
    assert "added c5.4xlarge" in capsys.readouterr().out

    (tmp_path / "vms.csv").write_text(SAMPLE.replace(",0.68,", ",0.70,"))
    assert script.main(["--csv", str(tmp_path / "vms.csv"), "--commit", "b" * 40, "--data-dir", str(data),
                        "--stacks-dir", str(stacks)]) == 0
    out = capsys.readouterr().out
    assert "c5.4xlarge in us-west-2: On-Demand $0.68 -> $0.7" in out and "added" not in out


def test_refresh_with_all_carries_every_type_of_the_copy(tmp_path, capsys):
    """Issue 39: every instance type, not the stacks' few (`--from-github --all` where GitHub is reachable)."""
    script, data, stacks = _load_script(), tmp_path / "data", _stacks(tmp_path)
    (tmp_path / "vms.csv").write_text(SAMPLE)
    assert script.main(["--csv", str(tmp_path / "vms.csv"), "--commit", "a" * 40, "--all",
                        "--data-dir", str(data), "--stacks-dir", str(stacks)]) == 0
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
        assert _load_script().main(["--from-github", "--github-api", base, "--github-raw", base,
                                    "--data-dir", str(tmp_path / "data"), "--stacks-dir", str(_stacks(tmp_path))]) == 0
    finally:
        server.shutdown()
    source = json.loads((tmp_path / "data" / "ec2_catalog_source.json").read_text())
    assert (source["commit"], source["commitDate"]) == (sha, "2026-11-23")
    assert "path=catalogs%2Fv7%2Faws%2Fvms.csv" in seen[0] and "per_page=1" in seen[0]
