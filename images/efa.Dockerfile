# The GPU training image with EFA: libfabric (with its EFA provider) and the AWS OFI NCCL plugin, so that NCCL
# moves gradients between nodes over EFA on instance types that have it (infra/specs/efa.py, docs/gpu.md).
# Without an EFA device (a g5 node, a laptop) the plugin finds no EFA provider and NCCL keeps its own
# TCP transport, so the same image runs everywhere. Build it on top of the GPU image, from the repository root:
#
#   docker build -f images/Dockerfile -t training:gpu --build-arg TORCH_INDEX_URL=https://pypi.org/simple .
#   docker build -f images/efa.Dockerfile -t training:gpu-efa --build-arg TRAINING_IMAGE=training:gpu images
#
# and give the stack `imageUri` = that image pushed to a registry (the stack's own build makes images/Dockerfile).
#
# Both come from AWS's EFA installer, the upstream way to install them (Amazon EC2 User Guide, "Elastic Fabric
# Adapter", Get started with EFA, Step 3: Install the EFA software; "Libfabric is installed to /opt/amazon/efa"),
# pinned to the version that guide names as the latest stable, 1.47.0, checked against AWS's signing key
# whose fingerprint the guide gives (4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC). Debian 12, the
# training image's base, is among the guide's supported systems. In a container the kernel module is
# the node's, so `--skip-kmod`, as aws/aws-ofi-nccl's own image does (docker/base/Dockerfile.ubuntu at tag
# v1.21.1: `./efa_installer.sh -y --skip-kmod`). The build fails if the plugin or libfabric is missing.
ARG TRAINING_IMAGE
# checkov:skip=CKV_DOCKER_7:TRAINING_IMAGE is the GPU training image built just before, named by the caller
FROM ${TRAINING_IMAGE}
ARG EFA_INSTALLER_VERSION=1.47.0
ARG EFA_KEY_FINGERPRINT=4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC
USER 0:0
WORKDIR /tmp/efa
# A pipe below (grep of gpg's output) must fail the build when gpg fails.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008,DL3003
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl gnupg \
    && curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
    && curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz.sig" \
    && curl -fsSLO https://efa-installer.amazonaws.com/aws-efa-installer.key \
    && GNUPGHOME="$(mktemp -d)" && export GNUPGHOME \
    && gpg --batch --import aws-efa-installer.key \
    && gpg --batch --with-colons --fingerprint | grep -q "^fpr:::::::::${EFA_KEY_FINGERPRINT}:" \
    && gpg --batch --verify "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz.sig" "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
    && tar -xf "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
    && (cd aws-efa-installer && ./efa_installer.sh -y --skip-kmod) \
    # NCCL loads its network plugin as libnccl-net.so from the library path; libfabric comes from /opt/amazon/efa.
    && plugin="$(find /opt/amazon/ofi-nccl -name 'libnccl-net*.so' -print -quit)" && test -n "${plugin}" \
    && ln -sf "${plugin}" /usr/local/lib/libnccl-net.so \
    && libfabric="$(find /opt/amazon/efa -name 'libfabric.so.1' -print -quit)" && test -n "${libfabric}" \
    && dirname "${libfabric}" > /etc/ld.so.conf.d/000-efa-libfabric.conf && ldconfig \
    && apt-get purge -y --auto-remove curl gnupg \
    && rm -rf /tmp/efa "${GNUPGHOME}" /var/lib/apt/lists/*
WORKDIR /app
USER 10001:10001
# A training pod has no long-running service to probe: its health is its exit code (as images/Dockerfile).
HEALTHCHECK NONE
