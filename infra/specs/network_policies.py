"""NetworkPolicies: ingress to our pods only from where it is needed. Enforced only where the cluster's
CNI enforces NetworkPolicies: cluster.py turns on the VPC CNI's network policy agent. Egress is left
open (data-prep downloads from the internet, every pod resolves names through CoreDNS); see
docs/security.md."""

from __future__ import annotations

from typing import Any

from elastic_training.elasticjob import JOB_LABEL, TRAINING_COMPONENT
from infra.specs.elastic import STORE_PORT, STORE_SELECTOR
from infra.specs.labels import PART_OF, object_meta
from infra.specs.suppressions import annotate

# Labels of the training worker pods (the ElasticJob's pod template; the controller copies them
# onto every worker pod). workloads.py builds the pods with them; the NetworkPolicies here admit them.
# JOB_LABEL and TRAINING_COMPONENT: the platform's contract (elastic_training.elasticjob).
TRAINING_PODS = {
    "matchLabels": {"app.kubernetes.io/component": TRAINING_COMPONENT},
    "matchExpressions": [{"key": JOB_LABEL, "operator": "Exists"}],
}


def _network_policy(
    name: str, component: str, namespace_name: str, pod_selector: dict[str, Any], ingress: list[dict[str, Any]]
) -> dict[str, Any]:
    # No rules is written as no `ingress` field (the same policy: policyTypes still lists Ingress): the
    # API server drops an empty list, so `ingress: []` would read back different from what was sent
    # (tests/cluster/test_every_object_applies.py).
    spec: dict[str, Any] = {"podSelector": pod_selector, "policyTypes": ["Ingress"]}
    if ingress:
        spec["ingress"] = ingress
    return annotate(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": object_meta(name, component, namespace_name),
            "spec": spec,
        }
    )


def deny_ingress_policy(namespace_name: str, component: str) -> dict[str, Any]:
    """No ingress to any pod of this project in the namespace, except what another policy admits
    (policies add up). It selects our pods by label rather than with `podSelector: {}`: the two
    are the same for the pods we create, and checkov's NetworkPolicy check only links a policy to
    pods through matchLabels."""
    return _network_policy(
        "deny-ingress", component, namespace_name, {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}, []
    )


def workload_network_policies(namespace_name: str) -> list[dict[str, Any]]:
    """The rendezvous store (no authentication: whoever reaches it can read and rewrite the
    rendezvous) is reachable only from training workers, on its port; training workers reach each
    other on any port (torchrun's TCPStore and gloo pick ports at run time); data-prep and test Jobs
    take no ingress at all."""
    store = _network_policy(
        "store-from-training",
        "rendezvous",
        namespace_name,
        {"matchLabels": STORE_SELECTOR},
        [{"from": [{"podSelector": TRAINING_PODS}], "ports": [{"protocol": "TCP", "port": STORE_PORT}]}],
    )
    peers = _network_policy(
        "training-peers",
        TRAINING_COMPONENT,
        namespace_name,
        {"matchLabels": {"app.kubernetes.io/component": TRAINING_COMPONENT}},
        [{"from": [{"podSelector": TRAINING_PODS}]}],
    )
    return [deny_ingress_policy(namespace_name, "workloads"), store, peers]
