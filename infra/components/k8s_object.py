"""One way to create any Kubernetes object: from its wire-form dict.

The specs in infra/specs/ are pure functions returning objects exactly as Kubernetes reads them
(camelCase, `apiVersion`/`kind`/`metadata`/...). Registering those dicts as they are keeps one
source of truth: what the tests validate against the Kubernetes schemas and compare with golden
files is what the provider applies. The type token is the one pulumi-kubernetes' own classes use
(`kubernetes:batch/v1:Job`, `kubernetes:core/v1:Namespace`), so the provider applies its usual
await logic for each kind.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_utilities


def type_token(api_version: str, kind: str) -> str:
    group_version = "core/v1" if api_version == "v1" else api_version
    return f"kubernetes:{group_version}:{kind}"


class KubernetesObject(pulumi.CustomResource):
    def __init__(self, resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_utilities.get_version()))
        super().__init__(type_token(obj["apiVersion"], obj["kind"]), resource_name, dict(obj), opts)
