"""EFA on GPU stacks whose instance type has it (issue 40), as the real `synth` renders them: a p5.48xlarge
stack gets the EFA device plugin, workers that request every EFA interface of their node and the node
security group's self-referencing rules; a g5.2xlarge stack (no EFA) gets none of it and keeps TCP.

Upstream facts checked here, from their sources:
- EFA interfaces per type: moto's EC2 instance data (moto/ec2/resources/instance_types.json.gz,
  `NetworkInfo.EfaSupported`, `NetworkInfo.EfaInfo.MaximumEfaInterfaces`), read directly rather than
  through our table;
- the device plugin: aws/eks-charts stable/aws-efa-k8s-device-plugin at chart v0.5.30 (commit
  5239609242f3430be50fb0b714a24d3ef2b47983): values.yaml image
  602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin tag v0.5.20 and its
  securityContext; templates/daemonset.yaml hostNetwork, the three hostPath volumes, the
  CriticalAddonsOnly toleration, system-node-critical;
- the rule: "An EFA requires a security group that allows all inbound and outbound traffic to and from
  the security group itself" (Amazon EC2 User Guide, Get started with EFA, Step 1); "-1" is every
  protocol (EC2 API, IpProtocol).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto
import pytest

from infra.config import load_settings
from infra.config.errors import ConfigError
from infra.config.stack_file import read_stack_file

MOTO_INSTANCE_TYPES = json.loads(
    gzip.decompress((Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read_bytes())
)
EFA_RESOURCE = "vpc.amazonaws.com/efa"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


def moto_efa_interfaces(instance_type: str) -> int:
    network = MOTO_INSTANCE_TYPES[instance_type]["NetworkInfo"]
    return network["EfaInfo"]["MaximumEfaInterfaces"] if network.get("EfaSupported") else 0


@pytest.fixture(scope="module")
def p5(synth_stack):
    return synth_stack("gpu", "nodeInstanceType=p5.48xlarge")


@pytest.fixture(scope="module")
def g5(synth_stack):
    return synth_stack("gpu", "nodeInstanceType=g5.2xlarge")


def worker_resources(synth) -> dict:
    job = synth.manifest("ElasticJob")
    (worker,) = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return worker["resources"]


def efa_plugins(synth) -> list[dict]:
    return [
        m for m in synth.manifests if m["kind"] == "DaemonSet" and m["metadata"]["name"] == "aws-efa-k8s-device-plugin"
    ]


def node_security_group(synth) -> str:
    (term,) = synth.manifest("EC2NodeClass")["spec"]["securityGroupSelectorTerms"]
    return term["id"]


def test_moto_says_which_types_have_efa():
    assert moto_efa_interfaces("p5.48xlarge") == 32 and moto_efa_interfaces("g5.2xlarge") == 0


def test_p5_workers_request_every_efa_interface_of_their_node(p5):
    resources = worker_resources(p5)
    assert (
        resources["requests"][EFA_RESOURCE]
        == resources["limits"][EFA_RESOURCE]
        == str(moto_efa_interfaces("p5.48xlarge"))
    )


def test_p5_runs_the_efa_device_plugin_as_upstreams_chart_does(p5):
    (plugin,) = efa_plugins(p5)
    assert plugin["metadata"]["namespace"] == "kube-system"
    pod = plugin["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"
    assert container["securityContext"] == {"allowPrivilegeEscalation": True, "privileged": True,
                                            "runAsNonRoot": False, "runAsUser": 0}  # fmt: skip
    assert pod["hostNetwork"] is True and pod["priorityClassName"] == "system-node-critical"
    assert pod["automountServiceAccountToken"] is False
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in pod["tolerations"]
    volumes = {v["name"]: v["hostPath"] for v in pod["volumes"]}
    assert volumes == {"device-plugin": {"path": "/var/lib/kubelet/device-plugins"},
                       "infiniband-volume": {"path": "/dev/infiniband/"},
                       "neuron-tools": {"path": "/opt/aws/neuron/", "type": "DirectoryOrCreate"}}  # fmt: skip
    assert {m["name"]: m["mountPath"] for m in container["volumeMounts"]} == {n: v["path"] for n, v in volumes.items()}


def test_p5_plugin_lands_where_the_workers_do(p5):
    """Same node selector as the NVIDIA plugin (the GPU worker nodes) and their taint tolerated."""
    (plugin,) = efa_plugins(p5)
    pod = plugin["spec"]["template"]["spec"]
    pool = p5.manifest("NodePool")["spec"]["template"]
    labels = pool["metadata"]["labels"]
    assert all(labels.get(key) == value for key, value in pod["nodeSelector"].items())
    for taint in pool["spec"]["taints"]:
        assert any(
            t.get("key") == taint["key"] and t.get("effect") in (None, taint["effect"]) for t in pod["tolerations"]
        )


def test_p5_node_security_group_admits_all_traffic_from_itself_both_ways(p5):
    group = node_security_group(p5)
    for rule_type in (INGRESS, EGRESS):
        rules = [r["inputs"] for r in p5.of_type(rule_type) if r["inputs"].get("referencedSecurityGroupId") == group
                 and r["inputs"]["securityGroupId"] == group]  # fmt: skip
        assert [r["ipProtocol"] for r in rules] == ["-1"], rule_type
        assert "fromPort" not in rules[0] and "toPort" not in rules[0]


def test_g5_keeps_the_tcp_path_and_renders_no_efa_part(g5):
    resources = worker_resources(g5)
    assert EFA_RESOURCE not in resources["requests"] and EFA_RESOURCE not in resources["limits"]
    assert efa_plugins(g5) == []
    group = node_security_group(g5)
    assert not [
        r
        for t in (INGRESS, EGRESS)
        for r in g5.of_type(t)
        if r["inputs"].get("referencedSecurityGroupId") == group and r["inputs"]["securityGroupId"] == group
    ]
    assert not [r for r in g5.resources if r["type"] == "elastic-training:infra:Efa"]


def test_synth_and_cost_say_which_path_a_stack_uses(p5, g5):
    p5_cost = json.loads((p5.directory / "cost.json").read_text())
    g5_cost = json.loads((g5.directory / "cost.json").read_text())
    assert p5_cost["interNode"].startswith("EFA: p5.48xlarge has 32 EFA interfaces")
    assert g5_cost["interNode"] == "TCP: g5.2xlarge has no EFA, so NCCL uses TCP sockets between nodes"


def test_the_stack_passes_a_precision_other_than_auto_and_refuses_gpu_arithmetic_on_a_cpu_stack(synth_stack):
    default = synth_stack("gpu", "nodeInstanceType=g5.2xlarge")
    bf16 = synth_stack("gpu", "nodeInstanceType=g5.2xlarge", "precision=bf16")

    def args(synth):
        (worker,) = synth.manifest("ElasticJob")["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        return worker["args"] if "args" in worker else worker["command"]

    assert "--precision" not in args(default)  # auto: the worker's own default
    assert args(bf16)[args(bf16).index("--precision") + 1] == "bf16"
    cpu_stack = {**read_stack_file("dev"), "elastic-training:precision": "bf16"}  # dev: c5 nodes, no GPU
    with pytest.raises(ConfigError, match="precision.*needs a GPU stack .*use auto or fp32"):
        load_settings(cpu_stack, "dev")


def test_p5_workers_launch_in_one_zone_and_g5_workers_in_every_zone(p5, g5):
    """EFA traffic can't cross Availability Zones (EC2 User Guide, EFA limitations)."""

    def zones(synth):
        requirements = synth.manifest("NodePool")["spec"]["template"]["spec"]["requirements"]
        (zone,) = [r["values"] for r in requirements if r["key"] == "topology.kubernetes.io/zone"]
        return zone

    assert len(zones(p5)) == 1 and len(zones(g5)) == 2 and zones(p5)[0] == zones(g5)[0]


def test_the_efa_image_pins_and_checks_the_installer_and_fails_without_the_plugin():
    dockerfile = (Path(__file__).resolve().parents[1] / "images" / "efa.Dockerfile").read_text()
    assert "ARG EFA_INSTALLER_VERSION=1.47.0" in dockerfile  # the guide's latest stable, not `latest`
    # AWS's signing key, as the EC2 User Guide prints its fingerprint (spaces removed).
    assert "ARG EFA_KEY_FINGERPRINT=4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC" in dockerfile
    assert "gpg --batch --verify" in dockerfile and "./efa_installer.sh -y --skip-kmod" in dockerfile
    assert 'test -n "${plugin}"' in dockerfile and 'test -n "${libfabric}"' in dockerfile
