"""Which EC2 On-Demand vCPU quota an instance type counts against, by its family.

EC2 counts running On-Demand instances in vCPUs against one quota per group of families. The
names are the EC2 User Guide's ("On-Demand Instance quotas": Running On-Demand DL / F / G and VT /
HPC / High Memory / Inf / P / Standard (A, C, D, H, I, M, R, T, Z) / Trn / X instances), and they
are what Service Quotas calls them. A family is the letters before the generation digit, matched
whole: `dl1` is DL, not Standard D; `hpc7a` is HPC, not Standard H; `inf2` is Inf, not Standard I;
`trn1` is Trn, not Standard T (so a first-letter fallback counts them against the wrong quota).

Codes: upstream-facts.md fact 18 gives Standard L-1216C47A, G and VT L-DB2E81BA and P L-417A185B.
For the others neither botocore's models (the service-quotas model has operations, no quota
data) nor the docs we could read name the code, so preflight reads it from the account's own
Service Quotas list by the documented name (ListServiceQuotas, service code ec2).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VcpuQuota:
    name: str  # the quota's name in Service Quotas and the EC2 User Guide
    code: str  # "" when it is to be looked up by name


STANDARD = VcpuQuota("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "L-1216C47A")
G_AND_VT = VcpuQuota("Running On-Demand G and VT instances", "L-DB2E81BA")
P = VcpuQuota("Running On-Demand P instances", "L-417A185B")
DL = VcpuQuota("Running On-Demand DL instances", "")
F = VcpuQuota("Running On-Demand F instances", "")
HPC = VcpuQuota("Running On-Demand HPC instances", "")
INF = VcpuQuota("Running On-Demand Inf instances", "")
TRN = VcpuQuota("Running On-Demand Trn instances", "")
X = VcpuQuota("Running On-Demand X instances", "")

# Families (the letters before the generation) -> quota. Standard's letters are its name's; `im`
# and `is` are I families (im4gn, is4gen); `gr` is a G family (gr6); `vt` is its own letters.
QUOTA_BY_FAMILY: dict[str, VcpuQuota] = {
    **{family: STANDARD for family in ("a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z")},
    "g": G_AND_VT,
    "gr": G_AND_VT,
    "vt": G_AND_VT,
    "p": P,
    "dl": DL,
    "f": F,
    "hpc": HPC,
    "inf": INF,
    "trn": TRN,
    "x": X,
}


def vcpu_quota(family: str) -> VcpuQuota | None:
    """The quota for an instance family, matched whole; None for a family not listed."""
    return QUOTA_BY_FAMILY.get(family)
