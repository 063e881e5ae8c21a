"""Every pinned version and image the stacks use, in one place (no "latest" anywhere).

Bump a version here, run the tests, and the change shows up in every rendered manifest. The EKS
add-ons are resolved to an exact version at `pulumi up` instead (why: see below).
"""

from datetime import date
from dataclasses import dataclass

# Kubernetes versions a stack may ask for. kubernetes-validate ships the matching OpenAPI schemas,
# so the tests validate manifests against exactly the version a stack runs.
SUPPORTED_KUBERNETES_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35")
DEFAULT_KUBERNETES_VERSION = "1.35"


@dataclass(frozen=True)
class EksSupport:
    """The EKS calendar dates of one Kubernetes minor version (UTC).

    Read in the EKS release calendar (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html,
    source awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc @ 8596db85)
    and endoflife.date/amazon-eks; the dates are those of upstream-facts.md fact 16. The page says
    "billing for extended support starts at the beginning of the day that the version reaches end
    of standard support, in the UTC+0 timezone", and "on the end of extended support date, you can
    no longer create new Amazon EKS clusters with the unsupported version": so each date below is
    the FIRST day of the next phase, not the last day of the current one.
    """

    end_of_standard: date
    end_of_extended: date


EKS_SUPPORT: dict[str, EksSupport] = {
    "1.31": EksSupport(end_of_standard=date(2025, 11, 26), end_of_extended=date(2026, 11, 26)),
    "1.32": EksSupport(end_of_standard=date(2026, 3, 23), end_of_extended=date(2027, 3, 23)),
    "1.33": EksSupport(end_of_standard=date(2026, 7, 29), end_of_extended=date(2027, 7, 29)),
    "1.34": EksSupport(end_of_standard=date(2026, 12, 2), end_of_extended=date(2027, 12, 2)),
    "1.35": EksSupport(end_of_standard=date(2027, 3, 27), end_of_extended=date(2028, 3, 27)),
}

# Control-plane price per cluster hour (fact 16, EKS pricing page): what extended support costs.
EKS_STANDARD_PRICE_PER_HOUR = "$0.10"
EKS_EXTENDED_PRICE_PER_HOUR = "$0.60"

STANDARD, EXTENDED, ENDED = "standard", "extended", "ended"


def eks_support_phase(version: str, today: date) -> str:
    """STANDARD, EXTENDED (billed at the higher price) or ENDED (EKS creates no such cluster) on `today` (UTC)."""
    support = EKS_SUPPORT[version]
    if today < support.end_of_standard:
        return STANDARD
    if today < support.end_of_extended:
        return EXTENDED
    return ENDED


# EKS managed add-ons. Which versions EKS offers depends on the Kubernetes version and the region
# (`aws eks describe-addon-versions --kubernetes-version V --addon-name N`, fact 17), and that list
# cannot be read from here (no AWS API offline, and botocore ships no add-on data). So the program
# does not pin a version per Kubernetes version: at `pulumi up` it asks EKS, through
# `aws.eks.get_addon_version(addon_name, kubernetes_version=<the stack's>, most_recent=True)`, for
# the newest build EKS publishes for exactly the stack's Kubernetes version, and the resolved
# version is written into the Addon (so `pulumi preview` shows when it moves). The versions below
# are the ones this project pinned before (never checked against EKS from here); `synth`'s mocks
# answer the lookup with them, as offline placeholders.
EFS_CSI_ADDON = "aws-efs-csi-driver"
METRICS_SERVER_ADDON = "metrics-server"
EFS_CSI_ADDON_VERSION = "v2.1.10-eksbuild.1"
METRICS_SERVER_ADDON_VERSION = "v0.8.0-eksbuild.2"
# CoreDNS as an EKS add-on (infra/components/addons.py): the EKS user guide's "CoreDNS versions" table
# (docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html) lists v1.12.4-eksbuild.1 as the
# latest for Kubernetes 1.33 and 1.34; an offline placeholder like the others.
COREDNS_ADDON = "coredns"
COREDNS_ADDON_VERSION = "v1.12.4-eksbuild.1"
OFFLINE_ADDON_VERSIONS = {
    EFS_CSI_ADDON: EFS_CSI_ADDON_VERSION,
    METRICS_SERVER_ADDON: METRICS_SERVER_ADDON_VERSION,
    COREDNS_ADDON: COREDNS_ADDON_VERSION,
}

# Managed node AMI family (x86-64, the training image's platform below).
NODE_AMI_TYPE = "AL2023_x86_64_STANDARD"

# The training image's platform, matching the node AMI above.
IMAGE_PLATFORM = "linux/amd64"

# GPU node groups (NVIDIA instance types, infra/aws/gpu_instances.py): the EKS-optimised AL2023 AMI with
# the NVIDIA driver and container toolkit. The value is an `AMITypes` enum member of the EKS API
# (botocore 1.44.5, data/eks/2017-11-01/service-2.json; the same string pulumi-aws passes as
# `amiType`). It has no device plugin: we run that ourselves (NVIDIA_DEVICE_PLUGIN_IMAGE).
NVIDIA_NODE_AMI_TYPE = "AL2023_x86_64_NVIDIA"

# NVIDIA device plugin: the image of NVIDIA/k8s-device-plugin's static DaemonSet at tag v0.20.0
# (deployments/static/nvidia-device-plugin.yml @ 1b826acc6af3079d8923bac395c3124b8861a9a6, the
# commit tagged v0.20.0).
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"

# EFA device plugin (GPU stacks whose instance type has EFA, infra/specs/efa.py): the image of
# aws/eks-charts' chart stable/aws-efa-k8s-device-plugin at chart version v0.5.30, appVersion v0.5.20
# (Chart.yaml and values.yaml `image.repository` / `image.tag` @ 5239609242f3430be50fb0b714a24d3ef2b47983;
# the chart's last change, bfe91c4b, "add latest EFA instance types").
EFA_DEVICE_PLUGIN_CHART_VERSION = "v0.5.30"
EFA_DEVICE_PLUGIN_IMAGE = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"

# The torch wheel index the image is built from (images/Dockerfile, build argument TORCH_INDEX_URL).
# CPU: PyTorch's CPU-only index (torch==2.13.0 there is 2.13.0+cpu). CUDA: PyPI, whose Linux x86-64
# torch 2.13.0 wheel is the CUDA build: its metadata (read with `pip install --dry-run --report`
# against https://pypi.org/simple, torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl) requires
# cuda-toolkit==13.0.3, nvidia-cudnn-cu13==9.20.0.48 and nvidia-nccl-cu13==2.29.7 on Linux, so the
# CUDA runtime, cuDNN and NCCL come as wheels and the slim Python base image stays; the driver
# comes from the node (the NVIDIA AMI's container toolkit).
TORCH_INDEX_URLS = {"cpu": "https://download.pytorch.org/whl/cpu", "cuda": "https://pypi.org/simple"}

# Karpenter, the worker nodes' autoscaler (infra/specs/capacity.py; why Karpenter: docs/design-notes.md,
# "Worker capacity"). The Helm chart's OCI address and version, and the controller image the chart
# at that version runs, by digest: read in aws/karpenter-provider-aws @ 1d927085 ("docs: update for
# patch release v1.14.1"), charts/karpenter/Chart.yaml (version/appVersion 1.14.1) and values.yaml
# (controller.image tag 1.14.1, digest below); the install command in website/content/en/v1.14/
# getting-started/getting-started-with-karpenter/scripts/step08-apply-helm-chart.sh. Karpenter 1.14.x
# supports Kubernetes 1.26 to 1.36 (hack/docs/compatibilitymatrix_gen/compatibility.yaml), which
# covers SUPPORTED_KUBERNETES_VERSIONS.
# The CRDs come from their own chart at the same version (charts/karpenter-crd/Chart.yaml @ 1d927085:
# version 1.14.1; published beside the controller chart by hack/release/common.sh), because Helm
# installs a chart's crds/ directory once and never upgrades it (website/content/en/v1.14/upgrading/
# upgrade-guide.md, "CRD Upgrades": "we recommend using the independent `karpenter-crd` chart").
KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
KARPENTER_VERSION = "1.14.1"
KARPENTER_CONTROLLER_DIGEST = "sha256:723130949e4cab989461ff07d1be4cd781d63515432494641b33c235f300ae23"
KARPENTER_MAX_KUBERNETES = "1.36"
