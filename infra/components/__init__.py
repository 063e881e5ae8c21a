"""Pulumi ComponentResources, one per concern (network, cluster, storage, registry, addons, elastic,
workloads, artifacts, device plugin, existing cluster), and the dynamic provider that waits for training
(completion.py; provider_errors.py makes its verdict one line in `pulumi up`). Each takes validated Settings plus Inputs from other components; no validation here."""
