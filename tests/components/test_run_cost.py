"""What a run cost (infra/components/run_cost.py) and the cost ceiling the wait keeps (maxRunCostUsd).

Pods and nodes are dicts shaped as the API server returns them (camelCase): a pod's `spec.nodeName`,
`status.startTime` and the worker container's `state.terminated.finishedAt`; a node's well-known
labels `node.kubernetes.io/instance-type` and `topology.kubernetes.io/zone` (kubernetes.io,
"Well-Known Labels, Annotations and Taints") and the capacity label EKS managed node groups set
(`eks.amazonaws.com/capacityType`: ON_DEMAND or SPOT) or Karpenter's (`karpenter.sh/capacity-type`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from infra.components import run_cost
from infra.components.completion import Snapshot, wait_for
from test_completion import FakeClock

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def worker(index: int, node: str | None, start: float | None, end: float | None = None) -> dict:
    status: dict = {"phase": "Succeeded" if end is not None else ("Running" if start is not None else "Pending")}
    if start is not None:
        status["startTime"] = at(start)
    state = (
        {"terminated": {"exitCode": 0, "finishedAt": at(end)}}
        if end is not None
        else {"running": {"startedAt": at(start or 0)}}
    )
    status["containerStatuses"] = [{"name": "elasticjob-worker", "state": state}]
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": f"train-run-1-worker-{index}"}, "spec": spec, "status": status}


def node(
    name: str,
    instance_type: str,
    capacity: str | None = "ON_DEMAND",
    zone: str = "us-west-2a",
    karpenter: str | None = None,
) -> dict:
    labels = {"node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/zone": zone}
    if capacity:
        labels["eks.amazonaws.com/capacityType"] = capacity
    if karpenter:
        labels["karpenter.sh/capacity-type"] = karpenter
    return {"metadata": {"name": name, "labels": labels}}


def nodes_of(*dicts: dict) -> dict[str, run_cost.Node]:
    return {d["metadata"]["name"]: run_cost.node_of(d) for d in dicts}


PRICES = run_cost.catalog_prices("us-west-2")


def test_a_run_on_two_nodes_costs_their_worker_hours_at_the_catalog_price():
    pods = [worker(0, "ip-a", 0, 90), worker(1, "ip-b", 5, 90), worker(2, None, None)]  # worker-2 never placed
    measured = run_cost.measure(pods, nodes_of(node("ip-a", "c5.4xlarge"), node("ip-b", "c5.4xlarge")), PRICES, T0)
    assert measured["durationSeconds"] == 90 * 60
    assert measured["workerNodeHours"] == pytest.approx(1.5 + 85 / 60, abs=1e-6)
    assert measured["estimatedCostUsd"] == pytest.approx((1.5 + 85 / 60) * 0.68, abs=1e-5)  # c5.4xlarge us-west-2
    assert measured["note"] == "complete" and [n["node"] for n in measured["nodes"]] == ["ip-a", "ip-b"]


def test_workers_sharing_a_node_count_it_once_and_a_gap_is_not_billed_to_the_run():
    pods = [
        worker(0, "ip-a", 0, 60),
        worker(1, "ip-a", 30, 90),  # overlapping on one node: 0-90
        worker(2, "ip-b", 0, 20),
        worker(3, "ip-b", 50, 60),
    ]  # a restarted worker: 0-20 and 50-60
    measured = run_cost.measure(pods, nodes_of(node("ip-a", "c5.4xlarge"), node("ip-b", "c5.4xlarge")), PRICES, T0)
    assert {n["node"]: n["hours"] for n in measured["nodes"]} == {"ip-a": 1.5, "ip-b": pytest.approx(0.5)}


def test_a_running_worker_counts_until_now():
    measured = run_cost.measure(
        [worker(0, "ip-a", 0)], nodes_of(node("ip-a", "c5.4xlarge")), PRICES, T0 + timedelta(hours=2)
    )
    assert (measured["durationSeconds"], measured["workerNodeHours"]) == (7200, 2.0)


@pytest.mark.parametrize("labels", [{"capacity": "SPOT"}, {"capacity": None, "karpenter": "spot"}])
def test_a_spot_node_is_priced_at_the_spot_median(labels):
    measured = run_cost.measure([worker(0, "ip-a", 0, 60)], nodes_of(node("ip-a", "g6.xlarge", **labels)), PRICES, T0)
    assert measured["nodes"][0]["capacityType"] == "SPOT"
    assert measured["estimatedCostUsd"] == pytest.approx(0.3961)  # g6.xlarge us-west-2: median of 3 zones' Spot


def test_a_node_without_a_price_is_named_and_the_cost_is_a_lower_bound():
    pods = [worker(0, "ip-a", 0, 60), worker(1, "ip-b", 0, 60)]
    measured = run_cost.measure(pods, nodes_of(node("ip-a", "c5.4xlarge"), node("ip-b", "x8aedz.6xlarge")), PRICES, T0)
    assert measured["estimatedCostUsd"] == pytest.approx(0.68)
    assert measured["unpriced"] == ["ip-b (x8aedz.6xlarge, ON_DEMAND)"] and measured["note"].startswith("lower bound")


def test_the_ceiling_holds_at_the_boundary_and_stops_a_cent_past_it():
    one_dollar_an_hour = lambda _node: 1.0  # noqa: E731
    pods, nodes = [worker(0, "ip-a", 0, 60)], nodes_of(node("ip-a", "c5.4xlarge"))
    assert run_cost.RunBudget(1.00, one_dollar_an_hour, lambda: T0).check(pods, nodes) is None
    assert run_cost.RunBudget(0.99, one_dollar_an_hour, lambda: T0).check(pods, nodes) == (
        "maxRunCostUsd exceeded: the run's worker nodes have cost an estimated $1.00 (1.00 node-hours), "
        "more than the ceiling of $0.99"
    )
    assert run_cost.RunBudget(None, one_dollar_an_hour, lambda: T0).check(pods, nodes) is None


class Cluster:
    """A cluster whose worker has run since T0; the fake clock moves the wall time with the wait's sleeps."""

    namespace, name = "training", "train-run-1"

    def __init__(self, clock):
        self.clock, self.deletions = clock, 0

    def read(self) -> Snapshot:
        job = {
            "metadata": {"name": self.name, "namespace": self.namespace},
            "status": {"conditions": [{"type": "Running", "status": "True"}]},
        }
        return Snapshot(job, [worker(0, "ip-a", 0)], [])

    def read_nodes(self, names):
        return {"ip-a": node("ip-a", "c5.4xlarge")} if "ip-a" in names else {}

    def worker_log_tail(self, pod, lines):
        return ""

    def delete_elasticjob(self):
        self.deletions += 1


def test_the_wait_stops_the_run_once_its_estimate_passes_the_ceiling():
    """c5.4xlarge at $0.68/hour and a ceiling of $0.17: a quarter of an hour (15 polls of 60 s) is exactly
    $0.17 and the run goes on; the next poll passes it, and the wait deletes the ElasticJob and says why."""
    clock = FakeClock()
    cluster = Cluster(clock)
    budget = run_cost.RunBudget(0.17, PRICES, lambda: T0 + timedelta(seconds=clock.now))
    verdict = wait_for(
        cluster,
        timeout_seconds=3600,
        poll_seconds=60,
        clock=clock,
        sleep=clock.sleep,
        guard=run_cost.guard(cluster, budget),
    )
    assert verdict.state == "failed" and cluster.deletions == 1
    assert clock.now == 16 * 60  # stopped at the first poll past 15 minutes
    assert verdict.message.startswith(
        "maxRunCostUsd exceeded: the run's worker nodes have cost an estimated $0.18 "
        "(0.27 node-hours), more than the ceiling of $0.17. The ElasticJob training/train-run-1 was deleted"
    )


def test_without_a_ceiling_the_wait_measures_and_the_final_cost_is_reported():
    clock = FakeClock()
    cluster = Cluster(clock)
    budget = run_cost.budget_for({"region": "us-west-2", "maxRunCostUsd": None})
    assert budget.ceiling is None and run_cost.guard(cluster, budget)(cluster.read()) is None
    final = run_cost.final(cluster, budget)
    assert final["nodes"][0]["instanceType"] == "c5.4xlarge" and final["nodes"][0]["hourlyUsd"] == 0.68
