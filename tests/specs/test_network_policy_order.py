"""NetworkPolicies exist before the pods they guard: every resource that makes pods (Deployment, Job,
ElasticJob) waits, through its dependsOn chain, for every NetworkPolicy of its namespace, so no pod
runs a moment unguarded. Read from the shared `dev` render (resources.json: urn, parent, dependsOn).

Pulumi waits for a component's children when a resource depends on the component (pulumi 3.272.0,
the pinned SDK, pulumi/runtime/rpc.py _add_dependency: "Local component resources act as
aggregations of their descendents. Rather than adding the component resource itself, each child
resource is added as a dependency."), so a dependency on a component counts for what is under it."""

from __future__ import annotations

POD_MAKERS = {
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:batch/v1:Job",
    "kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob",
}
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def waits_for(resources: list[dict], urn: str) -> set[str]:
    """Every URN `urn` waits for, following dependsOn, and components down to their children."""
    children: dict[str, list[str]] = {}
    for r in resources:
        children.setdefault(r["parent"], []).append(r["urn"])
    by_urn = {r["urn"]: r for r in resources}
    seen: set[str] = set()
    todo = list(by_urn[urn]["dependsOn"])
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo += by_urn[current]["dependsOn"] if current in by_urn else []
        todo += children.get(current, [])
    return seen


def test_every_pod_maker_waits_for_every_policy_of_its_namespace(dev):
    policies = dev.of_type(POLICY)
    assert {p["inputs"]["metadata"]["name"] for p in policies} >= {
        "deny-ingress",
        "store-from-training",
        "training-peers",
    }
    makers = [r for r in dev.resources if r["type"] in POD_MAKERS]
    assert {r["inputs"]["kind"] for r in makers} == {"Deployment", "StatefulSet", "Job", "ElasticJob"}
    for maker in makers:
        namespace = maker["inputs"]["metadata"]["namespace"]
        guarding = {p["urn"] for p in policies if p["inputs"]["metadata"]["namespace"] == namespace}
        assert guarding, f"no NetworkPolicy in {namespace} for {maker['name']}"
        assert guarding <= waits_for(dev.resources, maker["urn"]), maker["name"]
