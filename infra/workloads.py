"""Workloads: the pipeline as stack resources, in order, each waited on by `pulumi up`:
data-prep Job -> training ElasticJob (awaited by ElasticJobCompletion) -> test Job.

A failed step fails `pulumi up` with its reason; a failed Job is replaced on the next `up`
(pulumi.com/replaceUnready), and every object has a fixed name, so it is deleted before it
is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.completion import ElasticJobCompletion
from infra.config import Settings
from infra.k8s_object import KubernetesObject
from infra.naming import component_type
from infra.specs import workloads as specs

# Pulumi's own wait outlasts the Kubernetes deadline, so the deadline's message is the one shown.
AWAIT_MARGIN_MINUTES = 5


@dataclass
class WorkloadsArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    kubeconfig: pulumi.Input[str]
    image_ref: pulumi.Output[str]
    prerequisites: list[pulumi.Resource]  # PVC, CSI driver, CRD, controller, etcd


class Workloads(pulumi.ComponentResource):
    data_prep: KubernetesObject
    training: KubernetesObject
    training_complete: ElasticJobCompletion
    test: KubernetesObject

    def __init__(self, name: str, args: WorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("Workloads"), name, None, opts)
        settings = args.settings
        timeouts = pulumi.CustomTimeouts(create=f"{settings.job_timeout_minutes + AWAIT_MARGIN_MINUTES}m")

        def after(*resources: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(resources),
                                          delete_before_replace=True, custom_timeouts=timeouts)

        self.data_prep = KubernetesObject(f"{name}-data-prep", specs.data_prep_job(settings, args.image_ref),
                                          after(*args.prerequisites))

        rdzv_id_arg = args.image_ref.apply(lambda ref: f"--rdzv_id={specs.rendezvous_id(settings, ref)}")
        self.training = KubernetesObject(f"{name}-training", specs.elastic_job(settings, args.image_ref, rdzv_id_arg),
                                         after(self.data_prep, *args.prerequisites))
        self.training_complete = ElasticJobCompletion(
            f"{name}-training-complete", kubeconfig=args.kubeconfig, namespace=settings.namespace,
            elasticjob_name=specs.names(settings.run_id).training, job_label=specs.JOB_LABEL,
            timeout_seconds=settings.job_timeout_minutes * 60, spec_hash=rdzv_id_arg,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.training], custom_timeouts=timeouts))

        self.test = KubernetesObject(f"{name}-test", specs.test_job(settings, args.image_ref),
                                     after(self.training_complete))
        self.register_outputs({"runId": settings.run_id})
