"""Workloads: the pipeline as stack resources, in order, each waited on by `pulumi up`:
data-prep Job -> training ElasticJob (awaited by ElasticJobCompletion) -> test Job -> export Job
(the run's model and metrics to the stack's artifacts bucket, infra/components/artifacts.py).

A failed step fails `pulumi up` with its reason; a failed Job is replaced on the next `up`
(pulumi.com/replaceUnready), and every object has a fixed name, so it is deleted before it
is replaced.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.components import artifacts
from infra.aws import iam
from infra.components.completion import ElasticJobCompletion
from infra.components.job_scheduling import JobSchedulingGuard
from infra.config import Settings
from infra.components.k8s_object import KubernetesObject
from infra.components.spec_identity import with_spec_hash
from infra.components.naming import aws_tags, component_type
from infra.specs import workloads as specs

# Pulumi's own wait outlasts the Kubernetes deadline, so the deadline's message is the one shown.
AWAIT_MARGIN_MINUTES = 5


@dataclass
class WorkloadsArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    kubeconfig: pulumi.Input[str]  # what the provider reads: a document (eks) or a file path (existing)
    image_ref: pulumi.Output[str]
    prerequisites: list[pulumi.Resource]  # PVC, CSI driver, CRD, controller, rendezvous store (and the device plugin)
    kube_context: str = ""  # "" is the kubeconfig's current-context
    # IRSA for an s3:// dataSource and for the export Job, which only target eks has (infra/config/).
    oidc_provider_arn: pulumi.Input[str] | None = None
    oidc_issuer: pulumi.Input[str] | None = None
    # The stack's artifacts bucket (target eks): the run's model and metrics are exported there.
    artifacts_bucket: pulumi.Output[str] | None = None
    artifacts_ready: list[pulumi.Resource] = field(
        default_factory=list
    )  # the bucket's settings, in place before writes


class Workloads(pulumi.ComponentResource):
    data_prep: KubernetesObject
    worker_budget: KubernetesObject
    training: KubernetesObject
    training_complete: ElasticJobCompletion
    test: KubernetesObject
    export: KubernetesObject | None  # target eks only: there is no bucket elsewhere

    def __init__(self, name: str, args: WorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Workloads"), name, None, opts)
        settings = args.settings
        timeouts = pulumi.CustomTimeouts(create=f"{settings.job_timeout_minutes + AWAIT_MARGIN_MINUTES}m")

        def after(*resources: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=list(resources),
                delete_before_replace=True,
                custom_timeouts=timeouts,
            )

        data_prep_needs = list(args.prerequisites)
        if specs.reads_from_s3(settings):
            data_prep_needs.append(self._s3_reader(name, args))
        self.data_prep = self._guarded(
            f"{name}-data-prep", specs.data_prep_job(settings, args.image_ref), args, after(*data_prep_needs)
        )

        # Before the ElasticJob, so no worker pod ever runs unguarded; named after the run, so a new
        # runId replaces it and `pulumi destroy` removes it with the run.
        self.worker_budget = KubernetesObject(
            f"{name}-training-pdb", specs.worker_disruption_budget(settings), after(*args.prerequisites)
        )
        rdzv_id_arg = args.image_ref.apply(lambda ref: f"--rdzv_id={specs.rendezvous_id(settings, ref)}")
        # A changed spec is a new ElasticJob, and a new wait that only takes this spec's result
        # (spec_identity.py): the controller never re-runs a finished job updated in place.
        elasticjob, spec_hash = with_spec_hash(specs.elastic_job(settings, args.image_ref, rdzv_id_arg))
        self.training = KubernetesObject(
            f"{name}-training",
            elasticjob,
            pulumi.ResourceOptions.merge(
                after(self.data_prep, self.worker_budget, *args.prerequisites),
                pulumi.ResourceOptions(replace_on_changes=["spec"]),
            ),
        )
        self.training_complete = ElasticJobCompletion(
            f"{name}-training-complete",
            kubeconfig=args.kubeconfig,
            context=args.kube_context,
            namespace=settings.namespace,
            elasticjob_name=specs.names(settings.run_id).training,
            job_label=specs.JOB_LABEL,
            timeout_seconds=settings.job_timeout_minutes * 60,
            spec_hash=spec_hash,
            region=settings.region,
            max_run_cost_usd=settings.max_run_cost_usd,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.training], custom_timeouts=timeouts),
        )

        run_cost = self.training_complete.runCost.apply(lambda measured: json.dumps(measured or {}, sort_keys=True))
        self.test = self._guarded(
            f"{name}-test", specs.test_job(settings, args.image_ref, run_cost), args, after(self.training_complete)
        )
        self.export = None
        if args.artifacts_bucket is not None:
            destination = pulumi.Output.concat(
                "s3://", args.artifacts_bucket, "/", artifacts.run_prefix(settings.run_id)
            )
            self.export = self._guarded(
                f"{name}-export",
                specs.export_job(settings, args.image_ref, destination),
                args,
                after(self.test, self._exporter(name, args, args.artifacts_bucket)),
            )
        self.register_outputs({"runId": settings.run_id})

    def _guarded(
        self, resource_name: str, job: dict, args: WorkloadsArgs, options: pulumi.ResourceOptions
    ) -> KubernetesObject:
        """The Job, and beside it (same dependencies) the guard that ends it when its pod can never be
        scheduled (infra/components/job_scheduling.py); a changed Job is a new guard."""
        settings = args.settings
        JobSchedulingGuard(
            f"{resource_name}-scheduling",
            kubeconfig=args.kubeconfig,
            context=args.kube_context,
            namespace=settings.namespace,
            job_name=job["metadata"]["name"],
            timeout_seconds=settings.job_timeout_minutes * 60,
            spec_hash=pulumi.Output.from_input(job).apply(
                lambda resolved: hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()
            ),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=options.depends_on, custom_timeouts=options.custom_timeouts
            ),
        )
        return KubernetesObject(resource_name, job, options)

    def _s3_reader(self, name: str, args: WorkloadsArgs) -> KubernetesObject:
        """IRSA for data-prep: allowed to read exactly the dataSource object."""
        settings = args.settings
        policy = json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": specs.s3_object_arn(settings.data_source)}
                ],
            }
        )
        return self._irsa_identity(
            args,
            f"{name}-data-prep",
            "read",
            specs.DATA_PREP_SERVICE_ACCOUNT,
            policy,
            specs.data_prep_service_account,
            needs=args.prerequisites,
        )

    def _exporter(self, name: str, args: WorkloadsArgs, artifacts_bucket: pulumi.Output[str]) -> KubernetesObject:
        """IRSA for the export Job: allowed to write (and read back, for the checksum comparison)
        objects under runs/<runId>/ of the bucket."""
        settings = args.settings
        policy = artifacts_bucket.apply(lambda bucket: artifacts.export_policy(bucket, settings.run_id))
        return self._irsa_identity(
            args,
            f"{name}-export",
            "write",
            specs.EXPORT_SERVICE_ACCOUNT,
            policy,
            specs.export_service_account,
            needs=[*args.artifacts_ready, *args.prerequisites],
        )

    def _irsa_identity(
        self,
        args: WorkloadsArgs,
        prefix: str,
        policy_suffix: str,
        service_account: str,
        policy: pulumi.Input[str],
        account_spec,
        needs: list[pulumi.Resource],
    ) -> KubernetesObject:
        """A Kubernetes service account mapped through IRSA to an IAM role that only it can assume
        and that `policy` limits; no AWS credentials live in the cluster."""
        settings = args.settings
        if args.oidc_provider_arn is None or args.oidc_issuer is None:
            raise ValueError(
                f"{prefix}: IRSA needs the cluster's OIDC provider (WorkloadsArgs.oidc_provider_arn and "
                "oidc_issuer), which only target eks has; the config refuses s3:// data elsewhere"
            )
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{prefix}-role",
            assume_role_policy=iam.irsa_trust_policy_output(
                args.oidc_provider_arn, args.oidc_issuer, settings.namespace, service_account
            ),
            tags=aws_tags(settings),
            opts=child,
        )
        role_policy = aws.iam.RolePolicy(f"{prefix}-{policy_suffix}", role=role.id, policy=policy, opts=child)
        return KubernetesObject(
            f"{prefix}-sa",
            account_spec(settings, role.arn),
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[role_policy, *needs]),
        )
