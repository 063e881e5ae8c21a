"""Every pinned version and image the stacks use, in one place (no "latest" anywhere).

Bump a version here, run the tests, and the change shows up in every rendered manifest.
"""

# Kubernetes versions a stack may ask for. EKS standard support moves every few months;
# kubernetes-validate ships the matching OpenAPI schemas, so the tests validate manifests
# against exactly the version a stack runs.
SUPPORTED_KUBERNETES_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35")
DEFAULT_KUBERNETES_VERSION = "1.33"

# EKS managed add-ons. Check what a region offers with
#   aws eks describe-addon-versions --kubernetes-version 1.33 --addon-name <name>
EFS_CSI_ADDON_VERSION = "v2.1.10-eksbuild.1"
METRICS_SERVER_ADDON_VERSION = "v0.8.0-eksbuild.2"

# TorchElastic controller (pytorch/elastic kubernetes/, amd64-only, distroless nonroot).
ELASTIC_CONTROLLER_IMAGE = "docker.io/torchelastic/kubernetes:0.1.0"

# etcd for torchrun's etcd rendezvous: must stay on 3.5.x, the last line with the v2 API
# (--enable-v2) that python-etcd speaks; 3.6 removed it.
ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.19"

# Managed node AMI family (x86-64: the controller image is amd64-only).
NODE_AMI_TYPE = "AL2023_x86_64_STANDARD"

# The training image's platform, matching the node AMI above.
IMAGE_PLATFORM = "linux/amd64"
