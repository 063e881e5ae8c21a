"""The Kubernetes provider never drops in-cluster objects from the state because the API could not
be reached, except when the user asks for it to destroy a cluster that is already gone
(upstream-facts-2.md, fact 9).

pulumi/pulumi-kubernetes @ 94977969d provider/pkg/provider/provider.go:
  - Configure: `deleteUnreachable` comes from the provider's `kubernetes:config:deleteUnreachable`
    when that is set (it then overrides the environment), else from PULUMI_K8S_DELETE_UNREACHABLE;
    both only count as "true". A failure to load the API schema (401, expired credentials, a
    blocked CIDR) marks the cluster unreachable.
  - Read on an unreachable cluster: with deleteUnreachable, an empty answer ("deleted": a refresh
    drops the object from the state); without, an error naming PULUMI_K8S_DELETE_UNREACHABLE.
  - Delete on an unreachable cluster: with deleteUnreachable, success; without, an error.
The model below is those branches; the provider's inputs are the real synth's.
"""

from __future__ import annotations

import re

from synth_support import REPO

TRUE = "true"  # provider.go trueStr


def delete_unreachable(provider_inputs: dict[str, str], env: dict[str, str]) -> bool:
    """provider.go Configure: the provider flag if set, else the environment variable."""
    if "deleteUnreachable" in provider_inputs:  # reaches Configure as kubernetes:config:deleteUnreachable
        return provider_inputs["deleteUnreachable"] == TRUE
    if "PULUMI_K8S_DELETE_UNREACHABLE" in env:
        return env["PULUMI_K8S_DELETE_UNREACHABLE"] == TRUE
    return False


def refresh_of_unreachable_object(provider_inputs: dict[str, str], env: dict[str, str]) -> str:
    """provider.go Read when clusterUnreachable: 'deleted' or the error."""
    if delete_unreachable(provider_inputs, env):
        return "deleted"
    return (
        "error: failed to read resource state due to unreachable cluster. If the cluster was deleted, you can "
        "remove this resource from Pulumi state by rerunning the operation with the PULUMI_K8S_DELETE_UNREACHABLE "
        "environment variable set to \"true\""
    )


def test_a_refresh_with_expired_credentials_keeps_the_objects(dev):
    provider = dev.one("pulumi:providers:kubernetes")["inputs"]
    assert refresh_of_unreachable_object(provider, {}).startswith("error: failed to read resource state")


def test_destroying_a_cluster_that_is_gone_works_with_the_documented_variable(dev):
    """The flag is left unset, not false: a set flag would override the variable."""
    provider = dev.one("pulumi:providers:kubernetes")["inputs"]
    troubleshooting = (REPO / "docs" / "troubleshooting.md").read_text()
    (command,) = re.findall(r"^(PULUMI_K8S_DELETE_UNREACHABLE=\S+) pulumi destroy\b", troubleshooting, flags=re.M)
    name, _, value = command.partition("=")
    assert refresh_of_unreachable_object(provider, {name: value}) == "deleted"


def test_the_model_follows_the_precedence(dev):
    """A provider flag set to false would make the variable useless: the reason it stays unset."""
    assert not delete_unreachable({"deleteUnreachable": "false"}, {"PULUMI_K8S_DELETE_UNREACHABLE": "true"})
    assert delete_unreachable({"deleteUnreachable": "true"}, {})
    assert not delete_unreachable({}, {"PULUMI_K8S_DELETE_UNREACHABLE": "1"})
