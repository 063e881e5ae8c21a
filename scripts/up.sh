#!/usr/bin/env bash
# The main job: set up, then `pulumi up` one stack (default: dev) with its preview.
# Needs the Pulumi CLI, Docker (with buildx), AWS CLI v2 and AWS credentials; preflight checks them all.
set -euo pipefail
cd "$(dirname "$0")/.."

stack=${1:-dev}
[ -f "stacks/Pulumi.${stack}.yaml" ] || {
  echo "up: no stack file stacks/Pulumi.${stack}.yaml; stacks: $(cd stacks && ls Pulumi.*.yaml | sed 's/Pulumi\.\(.*\)\.yaml/\1/' | tr '\n' ' ')" >&2
  exit 2
}
bash scripts/setup.sh
# Catch config mistakes in seconds, before any cloud call.
.venv/bin/python -m infra.synth "$stack" --out ".synth/${stack}" >/dev/null
# Then the account, zones, quotas, versions and local tools (read-only AWS calls), and the cost:
# a failed check stops here, before anything is created (exit 1; README, "Before your first up").
.venv/bin/python -m infra.preflight "$stack" || {
  echo "up: preflight failed for stack ${stack}; fix the checks marked FAIL above (nothing was created)" >&2
  exit 1
}

# State lives in .pulumi-state/ (Pulumi.yaml's backend) unless PULUMI_BACKEND_URL says otherwise.
mkdir -p .pulumi-state
pulumi stack select --create "$stack"
pulumi up --stack "$stack"
