"""Network: a VPC with a public and a private subnet per availability zone, NAT for egress.

Nodes and EFS mount targets live in the private subnets; the public ones hold the NAT gateway
(and any internet-facing load balancer). Subnet counts are plain values known when the program
runs, so every resource shows in `pulumi preview`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.config import Settings
from infra.components.naming import aws_tags, component_type

VPC_CIDR = "10.0.0.0/16"


def subnet_cidrs(zone_count: int) -> tuple[list[str], list[str]]:
    """(private, public) CIDRs: a /19 per zone for pods and nodes (the VPC CNI gives every pod a
    VPC address), a /22 per zone for the NAT gateway and load balancers."""
    vpc = ipaddress.IPv4Network(VPC_CIDR)
    private = list(vpc.subnets(new_prefix=19))[:zone_count]
    public_block = list(vpc.subnets(new_prefix=17))[1]
    public = list(public_block.subnets(new_prefix=22))[:zone_count]
    return [str(n) for n in private], [str(n) for n in public]


@dataclass
class NetworkArgs:
    settings: Settings
    availability_zones: list[str]


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    public_subnet_ids: list[pulumi.Output[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Network"), name, None, opts)
        settings = args.settings
        child = pulumi.ResourceOptions(parent=self)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=VPC_CIDR,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=aws_tags(settings, Name=f"{name}-vpc"),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=aws_tags(settings, Name=f"{name}-igw"), opts=child
        )

        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=aws_tags(settings, Name=f"{name}-public"),
            opts=child,
        )

        private_cidrs, public_cidrs = subnet_cidrs(len(args.availability_zones))
        self.public_subnet_ids, self.private_subnet_ids = [], []
        nat = None
        for index, zone in enumerate(args.availability_zones):
            public = aws.ec2.Subnet(
                f"{name}-public-{index}",
                vpc_id=vpc.id,
                cidr_block=public_cidrs[index],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags=aws_tags(settings, Name=f"{name}-public-{zone}", **{"kubernetes.io/role/elb": "1"}),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{index}", subnet_id=public.id, route_table_id=public_rt.id, opts=child
            )
            self.public_subnet_ids.append(public.id)
            if nat is None:
                # One NAT gateway for the stack: training pulls images and data through it, and a
                # second one would double a fixed hourly cost for a batch workload.
                eip = aws.ec2.Eip(
                    f"{name}-nat-eip", domain="vpc", tags=aws_tags(settings, Name=f"{name}-nat"), opts=child
                )
                nat = aws.ec2.NatGateway(
                    f"{name}-nat",
                    allocation_id=eip.id,
                    subnet_id=public.id,
                    tags=aws_tags(settings, Name=f"{name}-nat"),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
                )

        assert nat is not None, (
            "the first public subnet made it: availabilityZoneCount is at least 2 (infra/config/keys.py)"
        )
        private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=aws_tags(settings, Name=f"{name}-private"),
            opts=child,
        )
        for index, zone in enumerate(args.availability_zones):
            private = aws.ec2.Subnet(
                f"{name}-private-{index}",
                vpc_id=vpc.id,
                cidr_block=private_cidrs[index],
                availability_zone=zone,
                tags=aws_tags(settings, Name=f"{name}-private-{zone}", **{"kubernetes.io/role/internal-elb": "1"}),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{index}", subnet_id=private.id, route_table_id=private_rt.id, opts=child
            )
            self.private_subnet_ids.append(private.id)

        self.vpc_id = vpc.id
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )
