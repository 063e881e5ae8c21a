"""The parts of Karpenter's CRD schemas that our NodePool and EC2NodeClass use, modelled from source.

Source: aws/karpenter-provider-aws @ 1d927085dd81a9df9301e613f371dac5b4d16bfe (the v1.14.1 docs
release; the chart installs these CRDs), pkg/apis/crds/karpenter.sh_nodepools.yaml and
pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml, version v1, openAPIV3Schema. Types, enums,
patterns, bounds and `required` lists are the CRDs'; the `x-kubernetes-validations` (CEL) rules on
the fields we set are re-stated in Python below, each with the rule's text.

Every object here has `additionalProperties: false` although the CRDs know more fields: the API
server prunes unknown fields of a structural schema without a word, so a misspelt field would
vanish on a real cluster; here it fails.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema

# kubernetes-sigs/karpenter's qualified-name pattern, as the CRDs write it for label and taint keys.
QUALIFIED = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
LABEL_VALUE = {"type": "string", "maxLength": 63, "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}
DURATION_OR_NEVER = {"type": "string", "pattern": r"^(([0-9]+(s|m|h))+|Never)$"}
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


METADATA = {"type": "object", "required": ["name"]}  # checked by the Kubernetes schema tests elsewhere

NODEPOOL = _object(
    {
        "apiVersion": {"const": "karpenter.sh/v1"},
        "kind": {"const": "NodePool"},
        "metadata": METADATA,
        "spec": _object(
            {
                "template": _object(
                    {
                        "metadata": _object(
                            {
                                "labels": {"type": "object", "additionalProperties": LABEL_VALUE},
                                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                            }
                        ),
                        "spec": _object(
                            {
                                "nodeClassRef": _object(
                                    {
                                        "group": {"type": "string", "pattern": "^[^/]*$", "minLength": 1},
                                        "kind": {"type": "string", "minLength": 1},
                                        "name": {"type": "string", "minLength": 1},
                                    },
                                    ("group", "kind", "name"),
                                ),
                                "requirements": {
                                    "type": "array",
                                    "maxItems": 100,
                                    "items": _object(
                                        {
                                            "key": {"type": "string", "maxLength": 316, "pattern": QUALIFIED},
                                            "operator": {
                                                "enum": [
                                                    "Gte",
                                                    "Lte",
                                                    "In",
                                                    "NotIn",
                                                    "Exists",
                                                    "DoesNotExist",
                                                    "Gt",
                                                    "Lt",
                                                ]
                                            },
                                            "values": {"type": "array", "items": LABEL_VALUE},
                                            "minValues": {"type": "integer", "minimum": 1, "maximum": 50},
                                        },
                                        ("key", "operator"),
                                    ),
                                },
                                "taints": {
                                    "type": "array",
                                    "items": _object(
                                        {
                                            "key": {"type": "string", "pattern": QUALIFIED},
                                            "value": {"type": "string", "pattern": QUALIFIED},
                                            "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
                                        },
                                        ("effect", "key"),
                                    ),
                                },
                                "expireAfter": DURATION_OR_NEVER,
                                "terminationGracePeriod": {"type": "string", "pattern": r"^([0-9]+(s|m|h))+$"},
                            },
                            ("nodeClassRef", "requirements"),
                        ),
                    },
                    ("spec",),
                ),
                "disruption": _object(
                    {
                        "consolidationPolicy": {"enum": ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]},
                        "consolidateAfter": DURATION_OR_NEVER,
                        "budgets": {
                            "type": "array",
                            "maxItems": 50,
                            "items": _object(
                                {
                                    "nodes": {"type": "string", "pattern": r"^((100|[0-9]{1,2})%|[0-9]+)$"},
                                    "reasons": {
                                        "type": "array",
                                        "maxItems": 50,
                                        "uniqueItems": True,
                                        "items": {"enum": ["Underutilized", "Empty", "Drifted"]},
                                    },
                                    "schedule": {"type": "string"},
                                    "duration": {
                                        "type": "string",
                                        "pattern": r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$",
                                    },
                                },
                                ("nodes",),
                            ),
                        },
                    },
                    ("consolidateAfter",),
                ),
                "limits": {
                    "type": "object",
                    "additionalProperties": {"type": ["integer", "string"], "pattern": QUANTITY},
                },
                "weight": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            ("template",),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)

SELECTOR_TAGS = {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}

EC2NODECLASS = _object(
    {
        "apiVersion": {"const": "karpenter.k8s.aws/v1"},
        "kind": {"const": "EC2NodeClass"},
        "metadata": METADATA,
        "spec": _object(
            {
                "amiSelectorTerms": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 30,
                    "items": _object(
                        {
                            "alias": {"type": "string", "maxLength": 30},
                            "id": {"type": "string", "pattern": "ami-[0-9a-z]+"},
                            "tags": SELECTOR_TAGS,
                            "name": {"type": "string"},
                            "owner": {"type": "string"},
                        }
                    ),
                },
                "role": {"type": "string", "minLength": 1},
                "instanceProfile": {"type": "string", "minLength": 1},
                "subnetSelectorTerms": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 30,
                    "items": _object({"id": {"type": "string", "pattern": "subnet-[0-9a-z]+"}, "tags": SELECTOR_TAGS}),
                },
                "securityGroupSelectorTerms": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 30,
                    "items": _object(
                        {
                            "id": {"type": "string", "pattern": "sg-[0-9a-z]+"},
                            "name": {"type": "string"},
                            "tags": SELECTOR_TAGS,
                        }
                    ),
                },
                "userData": {"type": "string"},
                "metadataOptions": _object(
                    {
                        "httpEndpoint": {"enum": ["enabled", "disabled"]},
                        "httpProtocolIPv6": {"enum": ["enabled", "disabled"]},
                        "httpPutResponseHopLimit": {"type": "integer", "minimum": 1, "maximum": 64},
                        "httpTokens": {"enum": ["required", "optional"]},
                    }
                ),
                "blockDeviceMappings": {
                    "type": "array",
                    "maxItems": 50,
                    "items": _object(
                        {
                            "deviceName": {"type": "string"},
                            "rootVolume": {"type": "boolean"},
                            "ebs": _object(
                                {
                                    "deleteOnTermination": {"type": "boolean"},
                                    "encrypted": {"type": "boolean"},
                                    "volumeSize": {
                                        "type": "string",
                                        "pattern": r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi"
                                        r"|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G"
                                        r"|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$",
                                    },
                                    "volumeType": {"enum": ["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]},
                                    "kmsKeyID": {"type": "string"},
                                }
                            ),
                        }
                    ),
                },
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            ("amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)

# --- the CEL rules on the fields we set ---------------------------------------------------------

# nodepools: spec.template.spec.requirements[].key and spec.template.metadata.labels keys.
KARPENTER_AWS_LABELS = {  # the karpenter.k8s.aws/* keys the rule allows (we use none of them)
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-generation",
}


def _label_key_problems(key: str) -> list[str]:
    domain = re.match(r"^([^/]+)", key)[1]
    problems = []
    # self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")
    if key not in ("karpenter.sh/capacity-type", "karpenter.sh/nodepool") and domain.endswith("karpenter.sh"):
        problems.append(f'label domain "karpenter.sh" is restricted: {key}')
    if key == "karpenter.sh/nodepool":  # self != "karpenter.sh/nodepool"
        problems.append('label "karpenter.sh/nodepool" is restricted')
    if key == "kubernetes.io/hostname":  # self != "kubernetes.io/hostname"
        problems.append('label "kubernetes.io/hostname" is restricted')
    if domain.endswith("karpenter.k8s.aws") and key not in KARPENTER_AWS_LABELS:
        problems.append(f'label domain "karpenter.k8s.aws" is restricted: {key}')
    return problems


def nodepool_rule_problems(pool: dict[str, Any]) -> list[str]:
    spec = pool["spec"]
    problems = []
    requirements = spec["template"]["spec"]["requirements"]
    for requirement in requirements:
        problems += _label_key_problems(requirement["key"])
        # self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)
        if requirement["operator"] == "In" and not requirement.get("values"):
            problems.append(f"requirement {requirement['key']}: In needs values")
        # self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)
        if (
            requirement["operator"] == "In"
            and "minValues" in requirement
            and len(requirement["values"]) < requirement["minValues"]
        ):
            problems.append(f"requirement {requirement['key']}: fewer values than minValues")
    for key in spec["template"].get("metadata", {}).get("labels", {}):
        problems += _label_key_problems(key)
    # budgets: self.all(x, has(x.schedule) == has(x.duration))
    for budget in spec.get("disruption", {}).get("budgets", []):
        if ("schedule" in budget) != ("duration" in budget):
            problems.append("a budget needs both schedule and duration, or neither")
    return problems


def nodeclass_rule_problems(node_class: dict[str, Any]) -> list[str]:
    spec = node_class["spec"]
    problems = []
    # (has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))
    if ("role" in spec) == ("instanceProfile" in spec):
        problems.append("exactly one of role and instanceProfile")
    terms = spec["amiSelectorTerms"]
    for term in terms:
        if "alias" in term:
            alias = term["alias"]
            # self.matches('^[a-zA-Z0-9]+@.+$'); self.split('@')[0] in [...]
            if not re.match(r"^[a-zA-Z0-9]+@.+$", alias):
                problems.append(f"alias {alias!r} is not family@version")
            elif alias.split("@")[0] not in (
                "al2",
                "al2023",
                "bottlerocket",
                "windows2019",
                "windows2022",
                "windows2025",
            ):
                problems.append(f"alias {alias!r}: unknown family")
            # !self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))
            if set(term) - {"alias"}:
                problems.append("an alias term takes no other selector")
    # !(self.exists(x, has(x.alias)) && self.size() != 1)
    if any("alias" in term for term in terms) and len(terms) != 1:
        problems.append("an alias must be the only amiSelectorTerm")
    # subnetSelectorTerms: !self.all(x, has(x.id) && has(x.tags)); self.all(x, has(x.tags) || has(x.id))
    for term in spec["subnetSelectorTerms"]:
        if not ("id" in term or "tags" in term) or ("id" in term and "tags" in term):
            problems.append("a subnet term selects by id or by tags")
    # blockDeviceMappings: self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1;
    # ebs: has(self.snapshotID) || has(self.volumeSize)
    mappings = spec.get("blockDeviceMappings", [])
    if sum(1 for m in mappings if m.get("rootVolume")) > 1:
        problems.append("at most one root volume")
    for mapping in mappings:
        if "ebs" in mapping and not ({"snapshotID", "volumeSize"} & set(mapping["ebs"])):
            problems.append("an EBS mapping needs volumeSize or snapshotID")
    # tags: k != 'eks:eks-cluster-name', !k.startsWith('kubernetes.io/cluster'), not karpenter.sh/nodepool,
    # karpenter.sh/nodeclaim, karpenter.k8s.aws/ec2nodeclass, k != ''
    for key in spec.get("tags", {}):
        if key in (
            "",
            "eks:eks-cluster-name",
            "karpenter.sh/nodepool",
            "karpenter.sh/nodeclaim",
            "karpenter.k8s.aws/ec2nodeclass",
        ) or key.startswith("kubernetes.io/cluster"):
            problems.append(f"tag {key!r} is reserved for Karpenter")
    return problems


def problems(obj: dict[str, Any]) -> list[str]:
    """Every way `obj` breaks the modelled CRD (schema first, then the CEL rules); [] when it is valid."""
    schema, rules = {
        "NodePool": (NODEPOOL, nodepool_rule_problems),
        "EC2NodeClass": (EC2NODECLASS, nodeclass_rule_problems),
    }[obj["kind"]]
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)
    ]
    return errors or rules(obj)
