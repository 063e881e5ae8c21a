"""Preflight's checks of the Kubernetes version and the EKS add-ons: what EKS answers today
(DescribeClusterVersions, DescribeAddonVersions) against the offline calendar and pins of infra/versions.py."""

from __future__ import annotations

from datetime import date
from typing import Any, Callable

from infra import versions
from infra.cli.preflight.aws_calls import CouldNotCheck, aws_call
from infra.cli.preflight.result import FAIL, PASS, WARN, Check, could_not_check
from infra.config import Settings


def kubernetes_version(
    settings: Settings, eks: Any, today: date, cluster_hour: Callable[[str], float | None]
) -> tuple[Check, str | None]:
    """The version's support phase as EKS answers it (else the offline calendar's, when EKS could not be
    asked), and that phase for the cost estimate (None where the version is refused). `cluster_hour` gives
    the $/hour of "eks-standard" and "eks-extended" (the Price List's answer, else the offline table's)."""
    version = settings.kubernetes_version
    offline = versions.eks_support_phase(version, today)
    try:
        answer = aws_call(eks, "describe_cluster_versions", clusterVersions=[version], includeAll=True)
    except CouldNotCheck as error:
        return could_not_check(
            "kubernetes-version",
            error,
            f"the offline EKS calendar (infra/versions.py) puts {version} in {offline} support today",
        ), offline
    found = [v for v in answer.get("clusterVersions", []) if v.get("clusterVersion") == version]
    if not found:
        return Check(
            "kubernetes-version",
            FAIL,
            f"EKS does not list Kubernetes {version}",
            f"-c kubernetesVersion= one of {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}",
        ), None
    status = found[0].get("versionStatus") or found[0].get("status", "")
    status = status.lower().replace("_", "-")
    if status == "standard-support":
        until = found[0].get("endOfStandardSupportDate")
        return Check(
            "kubernetes-version",
            PASS,
            f"{version} is in EKS standard support"
            + (f" until {until:%Y-%m-%d}" if hasattr(until, "strftime") else ""),
        ), versions.STANDARD
    if status == "extended-support":
        # Priced only here: the Price List API is asked for it only when the difference is to be shown.
        standard, extended = cluster_hour("eks-standard"), cluster_hour("eks-extended")
        more = (
            ""
            if standard is None or extended is None
            else (
                f": the control plane costs ${extended:.2f}/hour instead of ${standard:.2f}/hour "
                f"(+${extended - standard:.2f}/hour, +${(extended - standard) * 24:.2f}/day)"
            )
        )
        return Check(
            "kubernetes-version",
            WARN,
            f"{version} is in EKS extended support{more}",
            "upgrade to a version in standard support before it bills at the extended rate",
        ), versions.EXTENDED
    in_standard = [
        v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.eks_support_phase(v, today) == versions.STANDARD
    ]
    return Check(
        "kubernetes-version",
        FAIL,
        f"EKS answers that {version} is {status or 'not supported'}: it creates no cluster of that version",
        f"-c kubernetesVersion= one in standard support: {', '.join(in_standard) or 'none known'}",
    ), None


def addon_versions(settings: Settings, eks: Any) -> Check:
    """Whether EKS offers each add-on synth rendered for the Kubernetes version."""
    version = settings.kubernetes_version
    lines, failed, warned = [], [], False
    for name, last_run in versions.OFFLINE_ADDON_VERSIONS.items():
        answer = aws_call(eks, "describe_addon_versions", kubernetesVersion=version, addonName=name)
        offered = [
            v["addonVersion"]
            for addon in answer.get("addons", [])
            if addon.get("addonName") == name
            for v in addon.get("addonVersions", [])
            if any(c.get("clusterVersion") == version for c in v.get("compatibilities", []))
        ]
        if not offered:
            failed.append(name)
            lines.append(f"{name}: no version offered for Kubernetes {version}")
        elif last_run in offered:
            lines.append(f"{name}: {len(offered)} versions offered, including {last_run}")
        else:
            warned = True
            lines.append(
                f"{name}: {last_run} (synth's offline render) is not offered for {version}; `up` installs "
                f"the newest EKS offers, one of {', '.join(offered[:4])}"
            )
    if failed:
        return Check(
            "addon-versions",
            FAIL,
            "; ".join(lines),
            f"choose a kubernetesVersion for which EKS offers {', '.join(failed)}",
        )
    return Check("addon-versions", WARN if warned else PASS, "; ".join(lines))
