"""ElasticController: our ElasticJob controller (controller/, `python -m controller` in the training
image) in the workload namespace: its ServiceAccount, Role, RoleBinding and Deployment
(infra/specs/elastic.py controller_objects). It comes after the shared volume's claim, which it
mounts read-only to read each run's progress, and after the CRD it watches."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from infra.components.k8s_object import KubernetesObject
from infra.components.naming import component_type
from infra.config import Settings
from infra.specs import elastic as specs
from infra.specs.workloads import image_by_tag, pull_policy


@dataclass
class ElasticControllerArgs:
    settings: Settings
    provider: pulumi.ProviderResource
    image_ref: pulumi.Input[str]
    # The CRD, the workload namespace, the shared claim (and on eks the nodes it runs on).
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class ElasticController(pulumi.ComponentResource):
    deployment: KubernetesObject

    def __init__(self, name: str, args: ElasticControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(component_type("ElasticController"), name, None, opts)
        settings = args.settings
        objects: list[KubernetesObject] = []
        for obj in specs.controller_objects(
            settings.namespace, args.image_ref, settings.pvc_name, pull_policy(settings), image_by_tag(settings)
        ):
            objects.append(
                KubernetesObject(
                    f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}",
                    obj,
                    pulumi.ResourceOptions(
                        parent=self, provider=args.provider, depends_on=[*args.depends_on, *objects]
                    ),
                )
            )
        self.deployment = objects[-1]
        self.register_outputs({"deployment": specs.CONTROLLER_NAME})
