"""Any instance type a user names: sized and rendered, or refused in one line; never a traceback, and
`cost` never leaves the workers out of its totals without saying so (issue 30 item 3).

The types are the issue's: c6i.4xlarge, t3.micro, p5.48xlarge, p6-b200.48xlarge (real types outside
the old 19-type table) and c5.4xlarg (a misspelling). Their shapes come from EC2's
DescribeInstanceTypes data (infra/aws/instance_shapes.py; tests/aws/test_instance_shapes.py checks
the table against moto's file); the commands are the real ones, in-process where they refuse input
and through `synth`'s subprocess where they render.
"""

from __future__ import annotations

import pytest

import infra.cli.synth
from infra.aws import instance_shapes
from infra.cli import compare, cost_command
from infra.cli import preflight as preflight_command

ISSUE_TYPES = ("c6i.4xlarge", "t3.micro", "p5.48xlarge", "p6-b200.48xlarge", "c5.4xlarg")
# What config says of each on the dev stack (workerCpu 15, workerMemory 24Gi): t3.micro is too small
# for dev's worker, c5.4xlarg is no type; the others load.
REFUSED = {
    "t3.micro": "config elastic-training:workerCpu='15' is invalid: must be at most 1750m",
    "c5.4xlarg": "config elastic-training:nodeInstanceType='c5.4xlarg' is invalid: is not an EC2 instance "
    "type offered for Linux; did you mean c5.4xlarge",
}


def no_aws(service, region):
    raise AssertionError(f"an AWS client ({service}, {region}) for input that config refuses")


def run(main, argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.mark.parametrize("instance_type", ISSUE_TYPES)
def test_cost_compare_and_preflight_answer_or_refuse_in_one_line(instance_type, capsys):
    override = f"nodeInstanceType={instance_type}"
    commands = {
        "cost": (cost_command.main, ["dev", "-c", override]),
        "compare": (compare.main, ["dev", "spot", "--a", override]),
        "preflight": (lambda argv: preflight_command.main(argv, make_client=no_aws), ["dev", "-c", override]),
    }
    for name, (main, argv) in commands.items():
        if instance_type not in REFUSED and name == "preflight":
            continue  # a type config accepts reaches AWS: tests/cli/test_preflight*.py
        code, out, err = run(main, argv, capsys)
        if instance_type in REFUSED:
            assert (code, out, err.count("\n")) == (2, "", 1), (name, err)
            assert REFUSED[instance_type] in err, (name, err)
        else:
            assert code == 0 and err == "", (name, err)


@pytest.mark.parametrize(
    "instance_type, why",
    [
        ("x8aedz.6xlarge", "x8aedz.6xlarge is in none of the price tables"),  # newer than all three
        ("m8i.4xlarge", "no price table lists m8i.4xlarge in us-west-2"),  # Karpenter's us-east-1 only
        ("p6-b200.48xlarge", "no price table lists p6-b200.48xlarge in us-west-2"),
    ],
)
def test_cost_names_the_worker_nodes_it_cannot_price_beside_the_totals(instance_type, why, capsys):
    """A type no price table has in the stack's region is sized, and the cost says, right under its
    totals, that the workers are not in them and why."""
    code, out, _ = run(cost_command.main, ["dev", "-c", f"nodeInstanceType={instance_type}"], capsys)
    first, second = out.splitlines()[:2]
    assert code == 0 and "or more" in first and "lower bound: no price read for worker nodes" in first
    assert second.startswith(
        f"  NOT IN THE TOTALS: worker nodes while a run trains: 2 x {instance_type} On-Demand: {why} "
    )


@pytest.mark.parametrize(
    "stack, instance_type, region",
    [
        ("dev", "c6a.8xlarge", "us-east-1"),
        ("dev", "m7i.4xlarge", "us-east-1"),
        ("dev", "m7i.4xlarge", "eu-west-1"),
        ("gpu", "g6.xlarge", "us-east-1"),
        ("gpu", "p4d.24xlarge", "us-east-1"),
        ("gpu", "p4d.24xlarge", "eu-west-1"),
    ],
)
def test_cost_prices_the_workers_of_any_type_in_its_region(stack, instance_type, region, capsys):
    """Issue 39: types outside the zone table said "NOT IN THE TOTALS: worker nodes"; the region tables price them."""
    code, out, _ = run(
        cost_command.main, [stack, "-c", f"nodeInstanceType={instance_type}", "-c", f"aws:region={region}"], capsys
    )
    assert code == 0 and "NOT IN THE TOTALS: worker nodes" not in out, out
    assert "worker nodes while a run trains: " in out and f"x {instance_type} On-Demand: $" in out


@pytest.mark.parametrize("instance_type", sorted(REFUSED))
def test_synth_refuses_in_one_line_and_writes_nothing(instance_type, tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out, err = run(
        infra.cli.synth.main, ["dev", "--out", str(out_dir), "-c", f"nodeInstanceType={instance_type}"], capsys
    )
    assert (code, err.count("\n")) == (2, 1) and REFUSED[instance_type] in err
    assert not out_dir.exists()


@pytest.mark.parametrize("instance_type, vcpus, memory_mib", [("c6i.4xlarge", 16, 32768)])
def test_synth_renders_a_type_outside_the_price_table(synth_stack, instance_type, vcpus, memory_mib):
    """c6i.4xlarge crashed synth with a ValueError traceback before (infra/specs/capacity.py
    worker_shape): the pool's limits now come from its shape."""
    synth = synth_stack("dev", f"nodeInstanceType={instance_type}")
    (pool,) = [m for m in synth.manifests if m["kind"] == "NodePool"]
    assert pool["spec"]["limits"] == {"cpu": str(4 * vcpus), "memory": f"{4 * memory_mib}Mi"}  # dev: nodeMaxCount 4
    # The pool: the type, and the priced types of exactly its shape (infra/config/capacity.py).
    types = next(
        r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
    )
    assert instance_type in types["values"]
    assert {instance_shapes.shape(t) for t in types["values"]} == {instance_shapes.shape(instance_type)}


@pytest.mark.parametrize("instance_type", ["c6i.4xlarge", "c7a.4xlarge", "g5.2xlarge", "p5.48xlarge"])
def test_cost_prices_the_workers_of_the_types_newcomers_chose(instance_type, capsys):
    """Issue 39: these said "NOT IN THE TOTALS: worker nodes"; the table carries them now."""
    code, out, _ = run(
        cost_command.main,
        ["dev", "-c", f"nodeInstanceType={instance_type}", "-c", "workerCpu=7", "-c", "workerMemory=24Gi"],
        capsys,
    )
    assert code == 0 and "NOT IN THE TOTALS" not in out and "or more" not in out.splitlines()[0]
    assert f"worker nodes while a run trains: 2 x {instance_type} On-Demand: $" in out
