"""What a training run cost: its duration, its worker node-hours and their estimated price.

A pure function of the worker pods (when each started and ended, and on which node) and those nodes'
instance types and capacity types, as the API server reports them:
- a pod's start is `status.startTime` (set when the kubelet accepted it); its end is the worker
  container's `state.terminated.finishedAt`, or "now" while it runs (a run measured mid-way);
- a node's instance type is its `node.kubernetes.io/instance-type` label and its zone
  `topology.kubernetes.io/zone` (well-known labels the kubelet sets: kubernetes.io docs,
  "Well-Known Labels, Annotations and Taints"); Spot is `eks.amazonaws.com/capacityType: SPOT`
  (EKS managed node groups) or `karpenter.sh/capacity-type: spot` (Karpenter);
- a node's worker hours are the union of its worker pods' spans (two workers on one node count
  the node once), and the run's cost is the sum of node-hours x the node's hourly price.

Prices come from the caller (`PriceOf`): the wait prices nodes from the catalog table
(infra/aws/instance_catalog.py: On-Demand, or the Spot median over the region's zones), the same
numbers the stack's estimate shows offline. A node whose price is unknown is listed in `unpriced`
and left out of the cost, which then says it is a lower bound. The fixed items (control plane, NAT,
system nodes) bill whether or not a run goes; they are in the stack's hourly figures, not here.

`RunBudget` is the wait's guard: with a ceiling (config `maxRunCostUsd`) it measures every snapshot
and stops the run, in one line, once the running estimate passes the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from infra.aws import instance_catalog
from infra.specs.workloads import WORKER_CONTAINER

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
EKS_CAPACITY_LABEL = "eks.amazonaws.com/capacityType"  # ON_DEMAND or SPOT
KARPENTER_CAPACITY_LABEL = "karpenter.sh/capacity-type"  # on-demand or spot


@dataclass(frozen=True)
class Node:
    name: str
    instance_type: str
    capacity: str  # ON_DEMAND or SPOT
    zone: str


PriceOf = Callable[[Node], float | None]


def node_of(node: dict[str, Any]) -> Node:
    """A Node from the API server's node object (camelCase dict)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    spot = labels.get(EKS_CAPACITY_LABEL) == "SPOT" or labels.get(KARPENTER_CAPACITY_LABEL) == "spot"
    return Node(
        node["metadata"]["name"],
        labels.get(INSTANCE_TYPE_LABEL, ""),
        "SPOT" if spot else "ON_DEMAND",
        labels.get(ZONE_LABEL, ""),
    )


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def pod_span(pod: dict[str, Any], now: datetime) -> tuple[str, datetime, datetime] | None:
    """(node, start, end) of a worker pod that ran; None for one never placed or never started."""
    node, status = (pod.get("spec") or {}).get("nodeName"), pod.get("status") or {}
    start = _time(status.get("startTime"))
    if not node or start is None:
        return None
    end = now
    for container in status.get("containerStatuses") or []:
        finished = ((container.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if container.get("name") == WORKER_CONTAINER and finished:
            end = _time(finished) or end
    return node, start, max(start, end)


def _union_hours(spans: list[tuple[datetime, datetime]]) -> float:
    total, current = 0.0, None
    for start, end in sorted(spans):
        if current and start <= current[1]:
            current = (current[0], max(current[1], end))
            continue
        if current:
            total += (current[1] - current[0]).total_seconds()
        current = (start, end)
    if current:
        total += (current[1] - current[0]).total_seconds()
    return total / 3600


def measure(pods: list[dict[str, Any]], nodes: dict[str, Node], price_of: PriceOf, now: datetime) -> dict[str, Any]:
    """The run-cost object: {durationSeconds, workerNodeHours, estimatedCostUsd, nodes: [...], unpriced, note}."""
    spans = [span for pod in pods if (span := pod_span(pod, now))]
    by_node: dict[str, list[tuple[datetime, datetime]]] = {}
    for node, start, end in spans:
        by_node.setdefault(node, []).append((start, end))
    rows: list[dict[str, Any]] = []
    unpriced: list[str] = []
    cost = 0.0
    for name in sorted(by_node):
        machine = nodes.get(name) or Node(name, "", "ON_DEMAND", "")
        hours = _union_hours(by_node[name])
        price = price_of(machine) if machine.instance_type else None
        if price is None:
            unpriced.append(f"{name} ({machine.instance_type or 'instance type unknown'}, {machine.capacity})")
        else:
            cost += hours * price
        rows.append(
            {
                "node": name,
                "instanceType": machine.instance_type,
                "capacityType": machine.capacity,
                "zone": machine.zone,
                "hours": round(hours, 6),
                "hourlyUsd": price,
                "costUsd": None if price is None else round(hours * price, 6),
            }
        )
    duration = (max(e for _, _, e in spans) - min(s for _, s, _ in spans)).total_seconds() if spans else 0.0
    note = "complete" if not unpriced else "lower bound: no price for " + "; ".join(unpriced)
    return {
        "durationSeconds": round(duration, 3),
        "workerNodeHours": round(sum(r["hours"] for r in rows), 6),
        "estimatedCostUsd": round(cost, 6),
        "nodes": rows,
        "unpriced": unpriced,
        "note": note,
    }


def catalog_prices(region: str) -> PriceOf:
    """Node prices from the catalog table: On-Demand, or the Spot median over the region's zones."""

    def price_of(node: Node) -> float | None:
        lookup = instance_catalog.spot_median if node.capacity == "SPOT" else instance_catalog.on_demand
        return lookup(node.instance_type, region).usd

    return price_of


class RunBudget:
    """The wait's cost guard: `check(pods, nodes)` is None while the run's estimate is within the
    ceiling, else the one line the wait fails with. `last` keeps the latest measure."""

    def __init__(
        self,
        ceiling_usd: float | None,
        price_of: PriceOf,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ):
        self.ceiling, self._price_of, self._now = ceiling_usd, price_of, now
        self.last: dict[str, Any] | None = None

    def check(self, pods: list[dict[str, Any]], nodes: dict[str, Node]) -> str | None:
        self.last = measure(pods, nodes, self._price_of, self._now())
        if self.ceiling is None or self.last["estimatedCostUsd"] <= self.ceiling:
            return None
        return (
            f"maxRunCostUsd exceeded: the run's worker nodes have cost an estimated "
            f"${self.last['estimatedCostUsd']:.2f} ({self.last['workerNodeHours']:.2f} node-hours), "
            f"more than the ceiling of ${self.ceiling:.2f}"
        )


# --- the glue the wait's provider calls (infra/components/completion.py) ------------------------


def budget_for(props: dict[str, Any]) -> RunBudget:
    ceiling = props.get("maxRunCostUsd")
    return RunBudget(float(ceiling) if ceiling not in (None, "") else None, catalog_prices(props.get("region") or ""))


def _measure_now(cluster: Any, budget: RunBudget, pods: list[dict[str, Any]]) -> str | None:
    names = {node for pod in pods if (node := (pod.get("spec") or {}).get("nodeName"))}
    nodes = {name: node_of(node) for name, node in cluster.read_nodes(names).items()} if names else {}
    return budget.check(pods, nodes)


def guard(cluster: Any, budget: RunBudget) -> Callable[[Any], str | None]:
    """The wait's guard for one snapshot. Nodes that cannot be read this time are read next time:
    a failed read never stops a run (the API errors are the wait's own business)."""

    def check(snapshot: Any) -> str | None:
        try:
            return _measure_now(cluster, budget, snapshot.pods)
        except Exception:  # noqa: BLE001 - any API trouble: measure again at the next poll
            return None

    return check


def final(cluster: Any, budget: RunBudget) -> dict[str, Any]:
    """The run's cost once the ElasticJob succeeded: measured on its finished pods, or the last
    running measure (with a note) when they can no longer be read."""
    try:
        _measure_now(cluster, budget, cluster.read().pods)
    except Exception as error:  # noqa: BLE001 - the run succeeded; its cost is a report, not a reason to fail
        if budget.last is None:
            return {"note": f"not measured: {error}"}
        return {**budget.last, "note": f"{budget.last['note']}; measured before the end ({error})"}
    return budget.last or {"note": "not measured"}  # _measure_now's check always sets it
