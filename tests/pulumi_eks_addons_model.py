"""Which EKS add-ons pulumi-eks creates by itself for given `eks:index:Cluster` inputs.

Read in pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts at tag v4.3.0 (commit
0f5a544711cbcace44720e2d70f6702925a2ea4b; unchanged at 7bf0c1b1, 2026-08; the stack pins 4.4.0):
- vpc-cni (line 1092): `args.useDefaultVpcCni !== undefined ? !args.useDefaultVpcCni : !args.autoMode?.enabled`;
- kube-proxy (line 764): `args.kubeProxyAddonOptions?.enabled ?? !args.autoMode?.enabled`, its version
  from aws.eks.getAddonVersion(kube-proxy, the cluster's version, mostRecent) unless one is given;
- coredns (lines 1175-1184): only when `corednsAddonOptions.enabled === true` (or configuration
  values are given), or when there is a node group to place it on: Fargate, the default node
  group (`!skipDefaultNodeGroup`) or Auto Mode, and `corednsAddonOptions.enabled ?? true`. With
  skipDefaultNodeGroup and managed node groups of our own, CoreDNS stays the self-managed
  Deployment EKS bootstraps, which a Kubernetes version bump does not upgrade.
"""

from __future__ import annotations

from typing import Any


def created_by_pulumi_eks(inputs: dict[str, Any]) -> set[str]:
    auto_mode = bool((inputs.get("autoMode") or {}).get("enabled"))
    addons = set()
    use_default_cni = inputs.get("useDefaultVpcCni")
    if (not use_default_cni) if use_default_cni is not None else not auto_mode:
        addons.add("vpc-cni")
    kube_proxy = (inputs.get("kubeProxyAddonOptions") or {}).get("enabled")
    if kube_proxy if kube_proxy is not None else not auto_mode:
        addons.add("kube-proxy")
    coredns = inputs.get("corednsAddonOptions") or {}
    explicit = coredns.get("enabled") is True or bool(coredns.get("configurationValues"))
    placeable = bool(inputs.get("fargate")) or not inputs.get("skipDefaultNodeGroup") or auto_mode
    if explicit or (placeable and coredns.get("enabled", True)):
        addons.add("coredns")
    return addons
