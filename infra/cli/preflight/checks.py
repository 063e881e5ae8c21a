"""The checks of `elastic-training preflight`: read-only AWS calls and local tools, one result each.

Each check is PASS, WARN, FAIL or SKIP with a short message and, for a failure, the fix. An AWS call
that is denied, throttled or not implemented by the endpoint is `WARN could not check: <reason>`,
never a traceback (the result type is in result.py, the longer checks in modules of their own, the
command and its report in command.py and report.py).
"""

from __future__ import annotations

import shutil
from datetime import date, datetime, timezone
from typing import Any, Callable

import boto3
from botocore.exceptions import ClientError, NoCredentialsError

from infra import versions
from infra.cli import cost
from infra.cli.preflight import capacity, eks_versions, local_tools, spot, spot_role
from infra.cli.preflight.result import FAIL, PASS, SKIP, WARN, Check, could_not_check
from infra.cli.preflight.aws_calls import UNEXPECTED_ANSWER, CouldNotCheck, aws_call, guarded, reason
from infra.aws import ec2_quotas, live_prices, live_service_prices, prices
from infra.config import Settings
from infra.aws.zones import usable_zone_names

CHECK_IDS = (
    "credentials",
    "region",
    "zones",
    "instance-type",
    "vcpu-quota",
    "elastic-ip-quota",
    "kubernetes-version",
    "addon-versions",
    "spot-market",
    "spot-role",
    "local-tools",
)

# Service Quotas codes: the On-Demand vCPU quotas by instance family, where the code is known
# (infra/aws/ec2_quotas.py; the others are looked up by name), and Elastic IPs (fact 18).
QUOTA_BY_FAMILY = {family: quota.code for family, quota in ec2_quotas.QUOTA_BY_FAMILY.items() if quota.code}
ELASTIC_IP_QUOTA = "L-0263D0A3"

# The Price List API is served from us-east-1; it answers for every region.
PRICING_REGION = "us-east-1"
# A region that is not enabled for the account refuses API calls made in it, so who we are and which
# regions are enabled are asked in a region every account has (us-east-1 needs no opt-in).
ALWAYS_ENABLED_REGION = "us-east-1"

ClientMaker = Callable[[str, str], Any]


def default_client(service: str, region: str) -> Any:
    """A client of boto3's default session: what a user's environment configures, nothing else."""
    return guarded(boto3.client(service, region_name=region))


def profile_clients(profile: str | None) -> ClientMaker:
    """Clients of the session `pulumi up` would use: the stack's `aws:profile` when it sets one (the
    provider's config wins over AWS_PROFILE), else the environment's. Raises botocore's
    ProfileNotFound when that profile is not configured."""
    session = boto3.Session(profile_name=profile)
    session.client("sts", region_name=ALWAYS_ENABLED_REGION)  # a profile that does not exist fails here, not mid-run
    return lambda service, region: guarded(session.client(service, region_name=region))


def refuses_credentials(error: ClientError) -> bool:
    """A refusal of the credentials themselves: AWS answers an unsigned, badly signed, expired or unknown
    key with 403 (401 for some services); a 500 from a proxy or throttling says nothing about them."""
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (401, 403)


class Preflight:
    def __init__(
        self,
        settings: Settings,
        make_client: ClientMaker = default_client,
        today: date | None = None,
        which: Callable[[str], str | None] = shutil.which,
    ):
        self.settings = settings
        self.make_client = make_client
        self.today = today or datetime.now(timezone.utc).date()
        self.which = which
        self._clients: dict[tuple[str, str], Any] = {}
        self.zones: list[str] = []
        self.phase: str | None = None
        # The Price List API's prices of the non-EC2 items and why some were not read (service_prices), read
        # once: by the Kubernetes-version check when it prices extended support, else after the checks.
        self._services: tuple[dict[str, prices.Price], list[str]] | None = None

    def client(self, service: str, region: str | None = None) -> Any:
        key = (service, region or self.settings.region)
        if key not in self._clients:
            self._clients[key] = self.make_client(*key)
        return self._clients[key]

    # --- the checks, in order; each returns one Check ------------------------------------------

    def credentials(self) -> Check:
        fix = (
            "configure AWS credentials: `aws configure` or `aws sso login --profile NAME` and export AWS_PROFILE=NAME "
            "(or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        )
        try:
            identity = self.client("sts", ALWAYS_ENABLED_REGION).get_caller_identity()
        except NoCredentialsError:
            return Check("credentials", FAIL, "no AWS credentials found (boto3's credential chain came up empty)", fix)
        except ClientError as error:
            if refuses_credentials(error):
                return Check("credentials", FAIL, f"AWS refused the credentials: {reason(error)}", fix)
            # A 500 from a proxy, throttling: nothing is known about the credentials yet.
            return Check("credentials", WARN, f"could not check: sts GetCallerIdentity: {reason(error)}")
        except UNEXPECTED_ANSWER as error:  # unreachable, or not AWS's answer (aws_calls.py)
            return Check("credentials", WARN, f"could not check: sts GetCallerIdentity: {reason(error)}")
        return Check("credentials", PASS, f"account {identity['Account']}, {identity['Arn']}")

    def region(self) -> Check:
        name = self.settings.region
        answer = aws_call(self.client("ec2", ALWAYS_ENABLED_REGION), "describe_regions", AllRegions=True)
        found = [r for r in answer.get("Regions", []) if r.get("RegionName") == name]
        if not found:
            return Check(
                "region",
                FAIL,
                f"{name} is not a region this account can see",
                "set aws:region to a region listed by `aws ec2 describe-regions`",
            )
        status = found[0].get("OptInStatus", "opt-in-not-required")
        if status in ("opt-in-not-required", "opted-in"):
            return Check("region", PASS, f"{name} is enabled ({status})")
        return Check(
            "region",
            FAIL,
            f"{name} is not enabled for this account ({status})",
            f"enable it (`aws account enable-region --region-name {name}`, or the console's AWS Regions page) "
            "or choose an enabled region with -c aws:region=...",
        )

    def zones_check(self) -> Check:
        count = self.settings.availability_zone_count
        # The same filter and the same choice as the program (infra/aws/zones.py, fact 13).
        answer = aws_call(
            self.client("ec2"),
            "describe_availability_zones",
            Filters=[
                {"Name": "opt-in-status", "Values": ["opt-in-not-required"]},
                {"Name": "state", "Values": ["available"]},
            ],
        )
        zones = answer.get("AvailabilityZones", [])
        usable = usable_zone_names([z["ZoneName"] for z in zones], [z["ZoneId"] for z in zones])
        if len(usable) < count:
            return Check(
                "zones",
                FAIL,
                f"{self.settings.region} has {len(usable)} available standard zones that EKS accepts "
                f"({', '.join(usable) or 'none'}); availabilityZoneCount is {count}",
                f"-c availabilityZoneCount={max(len(usable), 2)} (2-4) or another region"
                if len(usable) >= 2
                else "choose another region with -c aws:region=...",
            )
        self.zones = usable[:count]
        return Check("zones", PASS, f"{count} of {len(usable)} usable zones: {', '.join(self.zones)}")

    def instance_type(self) -> Check:
        # Every node group's type, in the zones the program takes (capacity.py).
        return Check("instance-type", *capacity.offering(self))

    def vcpu_quota(self) -> Check:
        if self.settings.capacity_type == "spot":
            return Check("vcpu-quota", WARN, spot.SPOT_QUOTA_NOT_READ)
        # Every node group against its family's On-Demand vCPU quota (capacity.py).
        return Check("vcpu-quota", *capacity.vcpu_quotas(self))

    def elastic_ip_quota(self) -> Check:
        quota = aws_call(
            self.client("service-quotas"), "get_service_quota", ServiceCode="ec2", QuotaCode=ELASTIC_IP_QUOTA
        )
        limit = int(quota["Quota"]["Value"])
        used = len(aws_call(self.client("ec2"), "describe_addresses").get("Addresses", []))
        if used < limit:
            return Check("elastic-ip-quota", PASS, f"{used} of {limit} Elastic IPs in use; the NAT gateway needs 1")
        return Check(
            "elastic-ip-quota",
            FAIL,
            f"{used} of {limit} Elastic IPs in use; the NAT gateway needs 1 more",
            f"release an unused one (`aws ec2 release-address --allocation-id ...`) or request more "
            f"(quota code {ELASTIC_IP_QUOTA})",
        )

    def kubernetes_version(self) -> Check:  # infra/cli/preflight/eks_versions.py
        result, self.phase = eks_versions.kubernetes_version(
            self.settings, self.client("eks"), self.today, self.cluster_hour
        )
        return result

    def addon_versions(self) -> Check:  # infra/cli/preflight/eks_versions.py
        return eks_versions.addon_versions(self.settings, self.client("eks"))

    def local_tools(self) -> Check:  # infra/cli/preflight/local_tools.py
        return local_tools.check(self.settings, self.which)

    # --- prices -----------------------------------------------------------------------------------

    def node_prices(self, now: datetime | None = None) -> tuple[cost.LivePrices, list[str]]:
        """What AWS says the stack's node types cost (infra/aws/live_prices.py); notes for what it did not."""
        live, notes = cost.LivePrices(), []
        now = now or datetime.now(timezone.utc)
        for kind in cost.node_types(self.settings):
            price, why = live_prices.on_demand(
                self.client("pricing", PRICING_REGION), kind, self.settings.region, self.today.isoformat()
            )
            if price:
                live.on_demand[kind] = price
            notes += [why] if why else []
        if cost.capacity_type(self.settings) == cost.SPOT:
            kind = self.settings.node_instance_type
            price, why = live_prices.spot(self.client("ec2"), kind, self.zones, now)
            if price:
                live.spot[kind] = price
            notes += [why] if why else []
        return live, notes

    def cluster_hour(self, what: str) -> float | None:
        """The EKS control plane's $/hour ("eks-standard" or "eks-extended"): the Price List API's, else the table's."""
        live = cost.LivePrices(services=self.service_prices()[0])
        return cost.service_price(what, self.settings.region, "cluster-hour", live).usd

    def service_prices(self) -> tuple[dict[str, prices.Price], list[str]]:
        """What the Price List API says the stack's other billed items cost in its region (EKS, NAT, public
        IPv4, gp3, EFS, ECR: infra/aws/live_service_prices.py); notes for what it did not."""
        if self._services is None:
            self._services = (
                live_service_prices.service_prices(
                    self.client("pricing", PRICING_REGION), self.settings.region, self.today.isoformat()
                )
                if cost.billed_items(self.settings)
                else ({}, [])
            )
        return self._services

    def spot_market(self) -> Check:  # infra/cli/preflight/spot.py (the estimate reads Spot prices in node_prices)
        result, self.spot_price = spot.check(
            self.settings,
            self.zones,
            datetime.now(timezone.utc),
            lambda op, **kw: aws_call(self.client("ec2"), op, **kw),
        )
        return result

    def spot_role(self) -> Check:  # infra/cli/preflight/spot_role.py
        return spot_role.check(self.settings, lambda: self.client("iam", ALWAYS_ENABLED_REGION))

    # --- everything -------------------------------------------------------------------------------

    def run(self) -> tuple[list[Check], dict[str, Any], list[str]]:
        checks: list[Check] = []
        notes: list[str] = []
        aws_ids = CHECK_IDS[1:-1]
        if self.settings.target != "eks":
            # Nothing in an AWS account: only the tools `pulumi up` needs on this machine.
            why = f"target {self.settings.target} creates no AWS resources"
            checks = [Check(i, SKIP, why) for i in CHECK_IDS[:-1]] + [self.local_tools()]
            return checks, cost.estimate(self.settings, self.today), notes
        first = self.credentials()
        checks.append(first)
        if first.status == FAIL:
            checks += [Check(i, SKIP, "no usable AWS credentials") for i in aws_ids]
        else:
            steps: list[tuple[str, Callable[[], Check]]] = [
                ("region", self.region),
                ("zones", self.zones_check),
                ("instance-type", self.instance_type),
                ("vcpu-quota", self.vcpu_quota),
                ("elastic-ip-quota", self.elastic_ip_quota),
                ("kubernetes-version", self.kubernetes_version),
                ("addon-versions", self.addon_versions),
                ("spot-market", self.spot_market),
                ("spot-role", self.spot_role),
            ]
            # What a failed check leaves nothing to check for.
            needs = {
                "zones": "region",
                "instance-type": "zones",
                "vcpu-quota": "region",
                "elastic-ip-quota": "region",
                "spot-market": "zones",
            }
            results: dict[str, Check] = {}
            for check_id, step in steps:
                required = needs.get(check_id)
                if required and results.get(required) and results[required].status in (FAIL, SKIP):
                    results[check_id] = Check(check_id, SKIP, f"the {required} check did not pass")
                    continue
                if check_id == "instance-type" and results["zones"].status == WARN:
                    results[check_id] = Check(check_id, SKIP, "the zones could not be read")
                    continue
                try:
                    results[check_id] = step()
                except CouldNotCheck as error:
                    results[check_id] = could_not_check(check_id, error)
            checks += [results[i] for i in aws_ids]
        checks.append(self.local_tools())
        live = None
        if first.status != FAIL:
            live, price_notes = self.node_prices()
            services, service_notes = self.service_prices()
            # Only the control plane's price of the phase the estimate bills, and a note about it only then.
            phase = self.phase or cost.control_plane_phase(self.settings, self.today)  # the one estimate uses
            unused = "eks-standard" if phase == versions.EXTENDED else "eks-extended"
            live.services = {what: price for what, price in services.items() if what != unused}
            notes += price_notes + [note for note in service_notes if not note.startswith(f"{unused}:")]
        estimate = cost.estimate(self.settings, self.today, phase=self.phase, live=live)
        return checks, estimate, notes
