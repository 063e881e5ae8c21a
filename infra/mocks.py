"""Pulumi mocks that run the real program with no cloud, no CLI and no network.

Every registration is recorded (type, name, parent, provider, dependencies, inputs) so `synth` can
write the inventory and the manifests, and tests can assert on them. Outputs that a cloud would
compute (ids, ARNs, URLs, a remote component's outputs) are invented here, deterministically, in
the shapes the real services return.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

ACCOUNT_ID = "123456789012"
# Pulumi's wire markers for a serialized resource reference.
SPECIAL_SIG = "4dabf18193072939515e22adb298388d"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"


def short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    custom: bool
    inputs: dict[str, Any]
    provider: str = ""
    parent: str = ""
    depends_on: list[str] = field(default_factory=list)
    # Resource options that decide what `pulumi destroy` does (retainData sets them).
    retain_on_delete: bool = False
    protect: bool = False


def _refs_to_urns(struct) -> None:
    """Replace resource references inside a request by their URN strings (in place).

    The stock MockMonitor turns references back into SDK objects on its own thread's event loop;
    awaiting those later fails with "attached to a different loop". The URN is all we record."""
    def fix(value) -> None:
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            fields = value.struct_value.fields
            if SPECIAL_SIG in fields and fields[SPECIAL_SIG].string_value == RESOURCE_SIG:
                value.string_value = fields["urn"].string_value
                return
            for item in fields.values():
                fix(item)
        elif kind == "list_value":
            for item in value.list_value.values:
                fix(item)
    for item in struct.fields.values():
        fix(item)


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: "RecordingMocks"):
        super().__init__(mocks)
        self.recording_mocks = mocks

    def RegisterResource(self, request):
        _refs_to_urns(request.object)
        self.recording_mocks.note_request(request)
        return super().RegisterResource(request)


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, project: str, stack: str, region: str):
        self.project, self.stack, self.region = project, stack, region
        self.registrations: list[Registration] = []
        self._requests: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.monitor = RecordingMonitor(self)

    def install(self) -> None:
        pulumi.runtime.set_mocks(self, project=self.project, stack=self.stack, preview=False, monitor=self.monitor)

    # -- recording ---------------------------------------------------------------------------
    def note_request(self, request) -> None:
        """Keep what only the raw request carries: parent, dependencies, retainOnDelete, protect."""
        with self._lock:
            self._requests[(request.type, request.name)] = request

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        with self._lock:
            request = self._requests.get((args.typ, args.name))
        registration = Registration(
            type=args.typ, name=args.name, urn=self._urn(args, request), custom=args.custom,
            inputs=dict(args.inputs), provider=args.provider or "",
            parent=request.parent if request is not None else "",
            depends_on=sorted(set(request.dependencies)) if request is not None else [],
            retain_on_delete=bool(request.retainOnDelete) if request is not None else False,
            protect=bool(request.protect) if request is not None else False)
        with self._lock:
            self.registrations.append(registration)
        resource_id, outputs = self.outputs_for(args)
        return resource_id, outputs

    def _urn(self, args, request) -> str:
        """The URN the mock monitor gives this registration (dependencies refer to it)."""
        return self.monitor.make_urn(request.parent if request is not None else "", args.typ, args.name)

    # -- invented outputs ------------------------------------------------------------------------
    def _arn(self, service: str, resource: str, region: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if region else ''}:{ACCOUNT_ID}:{resource}"

    def _resource_ref(self, typ: str, name: str, state: dict[str, Any]) -> dict[str, Any]:
        urn = f"urn:pulumi:{self.stack}::{self.project}::{typ}::{name}"
        self.monitor.resources[urn] = MockMonitor.ResourceRegistration(urn, f"{name}-id", state)
        return {SPECIAL_SIG: RESOURCE_SIG, "urn": urn, "id": f"{name}-id"}

    def outputs_for(self, args) -> tuple[str, dict[str, Any]]:
        name, typ, out = args.name, args.typ, dict(args.inputs)
        h = short_hash(f"{typ}/{name}", 17)
        resource_id = f"{name}-id"
        if typ == "aws:ec2/vpc:Vpc":
            resource_id = f"vpc-{h}"
        elif typ == "aws:ec2/subnet:Subnet":
            resource_id = f"subnet-{h}"
        elif typ == "aws:ec2/securityGroup:SecurityGroup":
            resource_id = f"sg-{h}"
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            resource_id = f"lt-{h}"
            out.update(latestVersion=1, defaultVersion=1)
        elif typ == "aws:iam/role:Role":
            role_name = out.get("name") or f"{name}-{h[:7]}"
            out.update(name=role_name, arn=self._arn("iam", f"role/{role_name}", region=False))
            resource_id = role_name
        elif typ == "aws:kms/key:Key":
            resource_id = f"{h[:8]}-0000-4000-8000-{h[:12]}"
            out.update(arn=self._arn("kms", f"key/{resource_id}"), keyId=resource_id)
        elif typ == "aws:efs/fileSystem:FileSystem":
            resource_id = f"fs-{h}"
            out.update(arn=self._arn("elasticfilesystem", f"file-system/{resource_id}"))
        elif typ == "aws:efs/accessPoint:AccessPoint":
            resource_id = f"fsap-{h}"
        elif typ == "aws:ecr/repository:Repository":
            repo = out.get("name") or f"{name}-{h[:7]}"
            out.update(name=repo, repositoryUrl=f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{repo}",
                       registryId=ACCOUNT_ID, arn=self._arn("ecr", f"repository/{repo}"))
            resource_id = repo
        elif typ == "docker-build:index:Image":
            out.update(digest="sha256:" + hashlib.sha256(json.dumps(args.inputs, sort_keys=True, default=str).encode()).hexdigest())
        elif typ == "eks:index:Cluster":
            kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []}
            cluster_name = f"{name}-eksCluster-{h[:7]}"
            issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{short_hash(name, 32).upper()}"
            out.update(
                kubeconfig=kubeconfig, kubeconfigJson=json.dumps(kubeconfig),
                oidcIssuer=issuer,
                oidcProviderArn=self._arn("iam", f"oidc-provider/{issuer}", region=False),
                clusterSecurityGroupId=f"sg-{short_hash(name + '/cluster', 17)}",
                nodeSecurityGroupId=f"sg-{short_hash(name + '/cluster', 17)}",
                eksCluster=self._resource_ref("aws:eks/cluster:Cluster", f"{name}-eksCluster",
                                              {"name": cluster_name, "arn": self._arn("eks", f"cluster/{cluster_name}")}),
            )
        if "arn" not in out and typ.startswith("aws:"):
            out["arn"] = self._arn(typ.split(":")[1].split("/")[0], f"{name}")
        return resource_id, out

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{letter}" for letter in "abcd"]
            return {"names": names, "zoneIds": [f"usw2-az{i}" for i in range(1, 5)], "state": "available"}
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {"userName": "AWS", "password": "mock-password", "authorizationToken": "bW9jaw==",
                    "proxyEndpoint": f"https://{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com"}
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": self._arn("iam", "user/mock", region=False), "userId": "MOCK"}
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com"}
        return {}
