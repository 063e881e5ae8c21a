#!/usr/bin/env bash
# The main job: set up, then `pulumi up` one stack (default: dev) with its preview.
# Needs the Pulumi CLI, Docker (with buildx) and AWS credentials in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

stack=${1:-dev}
[ -f "stacks/Pulumi.${stack}.yaml" ] || {
  echo "up: no stack file stacks/Pulumi.${stack}.yaml; stacks: $(cd stacks && ls Pulumi.*.yaml | sed 's/Pulumi\.\(.*\)\.yaml/\1/' | tr '\n' ' ')" >&2
  exit 2
}
for tool in pulumi docker aws; do
  command -v "$tool" >/dev/null || { echo "up: '$tool' is not installed (see README, Prerequisites)" >&2; exit 2; }
done
aws sts get-caller-identity >/dev/null 2>&1 \
  || { echo "up: no usable AWS credentials (aws sts get-caller-identity failed); configure a profile or export AWS_PROFILE" >&2; exit 2; }

bash scripts/setup.sh
# Catch config mistakes in seconds, before any cloud call.
.venv/bin/python -m infra.synth "$stack" --out ".synth/${stack}" >/dev/null

# State lives in .pulumi-state/ (Pulumi.yaml's backend) unless PULUMI_BACKEND_URL says otherwise.
mkdir -p .pulumi-state
pulumi stack select --create "$stack"
pulumi up --stack "$stack"
