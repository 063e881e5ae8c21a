"""Pulumi mocks that run the real program with no cloud, no CLI and no network.

Every registration is recorded (type, name, parent, provider, dependencies, inputs) so `synth` can
write the inventory and the manifests, and tests can assert on them. Outputs that a cloud would
compute (ids, ARNs, URLs, a remote component's outputs) are invented here, deterministically, in
the shapes the real services return.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from infra import versions

ACCOUNT_ID = "123456789012"
# Who runs the program: an assumed-role session, as SSO and CI credentials are. STS puts the role's
# name in the session ARN, without the role's path.
DEPLOYER_ROLE = "deployer"
DEPLOYER_SESSION_ARN = f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{DEPLOYER_ROLE}/mock-session"


@dataclass(frozen=True)
class Zone:
    """One entry of EC2 DescribeAvailabilityZones (the fields the data source reads or filters on)."""

    name: str
    zone_id: str
    opt_in_status: str  # opt-in-not-required (a regular Availability Zone), opted-in, not-opted-in
    state: str = "available"


# What DescribeAvailabilityZones answers an account that opted in to a Local Zone / Wavelength Zone:
# those come back too (upstream-facts.md fact 13) and sort first by name. Zone names map to zone IDs
# per account; these mappings are invented, the zone IDs exist. us-east-1 holds use1-az3, which EKS
# refuses for cluster subnets (infra/aws/zones.py), under the name that sorts first among the regular zones.
ZONES: dict[str, list[Zone]] = {
    "us-east-1": [
        Zone("us-east-1a", "use1-az3", "opt-in-not-required"),
        Zone("us-east-1b", "use1-az1", "opt-in-not-required"),
        Zone("us-east-1c", "use1-az2", "opt-in-not-required"),
        Zone("us-east-1d", "use1-az4", "opt-in-not-required"),
        Zone("us-east-1e", "use1-az5", "opt-in-not-required"),
        Zone("us-east-1f", "use1-az6", "opt-in-not-required"),
        Zone("us-east-1-bos-1a", "use1-bos1-az1", "opted-in"),
        Zone("us-east-1-wl1-bos-wlz-1", "use1-wl1-bos-wlz1", "opted-in"),
    ],
    "us-west-2": [
        Zone("us-west-2a", "usw2-az1", "opt-in-not-required"),
        Zone("us-west-2b", "usw2-az2", "opt-in-not-required"),
        Zone("us-west-2c", "usw2-az3", "opt-in-not-required"),
        Zone("us-west-2d", "usw2-az4", "opt-in-not-required"),
        Zone("us-west-2-lax-1a", "usw2-lax1-az1", "opted-in"),
    ],
}


def zones_of(region: str) -> list[Zone]:
    """Regions not listed above get four regular zones a-d."""
    return ZONES.get(
        region,
        [
            Zone(f"{region}{letter}", f"{region}-az{index}", "opt-in-not-required")
            for index, letter in enumerate("abcd", start=1)
        ],
    )


def describe_availability_zones(region: str, args: dict[str, Any]) -> dict[str, Any]:
    """aws:index/getAvailabilityZones as the provider answers it: EC2 applies `state` and the
    filters (a zone passes a filter when its field equals any of the values), then the provider
    sorts by name, drops excludeNames/excludeZoneIds, and returns names and zoneIds in parallel
    (hashicorp/terraform-provider-aws internal/service/ec2/ec2_availability_zones_data_source.go @ 0a55e18a)."""
    fields = {
        "opt-in-status": lambda z: z.opt_in_status,
        "zone-name": lambda z: z.name,
        "zone-id": lambda z: z.zone_id,
        "state": lambda z: z.state,
    }
    # Zones the account did not opt in to come back only with AllAvailabilityZones.
    zones = [z for z in zones_of(region) if z.opt_in_status != "not-opted-in" or args.get("allAvailabilityZones")]
    if args.get("state"):
        zones = [z for z in zones if z.state == args["state"]]
    for spec in args.get("filters") or []:
        if spec["name"] not in fields:
            raise ValueError(f"the mocks do not model the DescribeAvailabilityZones filter {spec['name']!r}")
        zones = [z for z in zones if fields[spec["name"]](z) in spec["values"]]
    zones = sorted(zones, key=lambda z: z.name)
    zones = [
        z
        for z in zones
        if z.name not in (args.get("excludeNames") or []) and z.zone_id not in (args.get("excludeZoneIds") or [])
    ]
    return {
        "names": [z.name for z in zones],
        "zoneIds": [z.zone_id for z in zones],
        "id": region,
        "groupNames": sorted({region}),
    }


def _program_warnings() -> logging.Logger:
    """Where `pulumi.log.warn` goes under the mocks: stderr, as `warning: ...` (synth's own format)."""
    logger = logging.getLogger("infra.cli.mocks.program")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("warning: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    return logger


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
    # Outputs the engine is told to store encrypted (ResourceOptions.additional_secret_outputs).
    secret_outputs: list[str] = field(default_factory=list)
    # What decides between an update in place and a replacement, and its order.
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False


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
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (invoke token, arguments), in order
        self._requests: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.monitor = RecordingMonitor(self)

    def install(self) -> None:
        pulumi.runtime.set_mocks(
            self,
            project=self.project,
            stack=self.stack,
            preview=False,
            monitor=self.monitor,
            logger=_program_warnings(),
        )

    # -- recording ---------------------------------------------------------------------------
    def note_request(self, request) -> None:
        """Keep what only the raw request carries: parent, dependencies, retainOnDelete, protect."""
        with self._lock:
            self._requests[(request.type, request.name)] = request

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        with self._lock:
            request = self._requests.get((args.typ, args.name))
        registration = Registration(
            type=args.typ,
            name=args.name,
            urn=self._urn(args, request),
            custom=bool(args.custom),
            inputs=dict(args.inputs),
            provider=args.provider or "",
            parent=request.parent if request is not None else "",
            depends_on=sorted(set(request.dependencies)) if request is not None else [],
            retain_on_delete=bool(request.retainOnDelete) if request is not None else False,
            protect=bool(request.protect) if request is not None else False,
            secret_outputs=list(request.additionalSecretOutputs) if request is not None else [],
            replace_on_changes=list(request.replaceOnChanges) if request is not None else [],
            delete_before_replace=bool(request.deleteBeforeReplace) if request is not None else False,
        )
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
            out.update(
                name=repo,
                repositoryUrl=f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{repo}",
                registryId=ACCOUNT_ID,
                arn=self._arn("ecr", f"repository/{repo}"),
            )
            resource_id = repo
        elif typ == "docker-build:index:Image":
            out.update(
                digest="sha256:"
                + hashlib.sha256(json.dumps(args.inputs, sort_keys=True, default=str).encode()).hexdigest()
            )
        elif typ == "eks:index:Cluster":
            kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []}
            cluster_name = out.get("name") or f"{name}-eksCluster-{h[:7]}"
            issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{short_hash(name, 32).upper()}"
            out.update(
                kubeconfig=kubeconfig,
                kubeconfigJson=json.dumps(kubeconfig),
                oidcIssuer=issuer,
                oidcProviderArn=self._arn("iam", f"oidc-provider/{issuer}", region=False),
                clusterSecurityGroupId=f"sg-{short_hash(name + '/cluster', 17)}",
                nodeSecurityGroupId=f"sg-{short_hash(name + '/cluster', 17)}",
                eksCluster=self._resource_ref(
                    "aws:eks/cluster:Cluster",
                    f"{name}-eksCluster",
                    {"name": cluster_name, "arn": self._arn("eks", f"cluster/{cluster_name}")},
                ),
            )
        elif typ == "aws:s3/bucket:Bucket":
            # Auto-named like Pulumi does (name + '-' + 7 random characters); S3 ARNs carry no
            # region or account.
            resource_id = out.get("bucket") or f"{name}-{h[:7]}"
            out.update(bucket=resource_id, arn=f"arn:aws:s3:::{resource_id}")
        elif typ == "aws:sqs/queue:Queue":
            # Auto-named like every Pulumi resource; SQS identifies a queue by its URL (the id
            # pulumi-aws reports), and its ARN carries region and account.
            queue = out.get("name") or f"{name}-{h[:7]}"
            resource_id = f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{queue}"
            out.update(name=queue, url=resource_id, arn=self._arn("sqs", queue))
        elif typ == "aws:iam/instanceProfile:InstanceProfile":
            profile = out.get("name") or f"{name}-{h[:7]}"
            out.update(name=profile, arn=self._arn("iam", f"instance-profile/{profile}", region=False))
            resource_id = profile
        elif typ == "aws:cloudwatch/logGroup:LogGroup":
            resource_id = out["name"]
            out.update(arn=self._arn("logs", f"log-group:{resource_id}"))
        if "arn" not in out and typ.startswith("aws:"):
            out["arn"] = self._arn(typ.split(":")[1].split("/")[0], f"{name}")
        return resource_id, out

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return describe_availability_zones(self.region, dict(args.args))
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            # Offline there is no list of what EKS publishes; answer with the placeholder versions
            # (infra/versions.py), for the versions a stack may ask for only.
            request = dict(args.args)
            if request.get("kubernetesVersion") not in versions.SUPPORTED_KUBERNETES_VERSIONS:
                raise ValueError(f"no add-on versions for Kubernetes {request.get('kubernetesVersion')!r}")
            return {
                "addonName": request["addonName"],
                "kubernetesVersion": request["kubernetesVersion"],
                "mostRecent": bool(request.get("mostRecent")),
                "version": versions.OFFLINE_ADDON_VERSIONS[request["addonName"]],
                "id": request["addonName"],
            }
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {
                "userName": "AWS",
                "password": "mock-password",
                "authorizationToken": "bW9jaw==",
                "proxyEndpoint": f"https://{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com",
            }
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT_ID,
                "arn": DEPLOYER_SESSION_ARN,
                "userId": "AROAMOCKDEPLOYER:mock-session",
                "id": ACCOUNT_ID,
            }
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com"}
        return {}
