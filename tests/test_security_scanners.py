"""Security, proven offline: scanners over everything the stacks render, and the AWS-side
properties read from each stack's resources.json.

- checkov (kubernetes) over every manifest of every stack in stacks/, checkov (dockerfile) over
  images/, hadolint over every Dockerfile: zero failed checks. A check that cannot apply to an
  object is suppressed on that object only (infra/specs/suppressions.py), and every suppression
  must still match a check that would fail, so the table cannot go stale.
- what checkov cannot see: the ElasticJob's pods, NetworkPolicy coverage, Pod Security labels.
- AWS: KMS-encrypted secrets, API endpoint access, EFS encryption and TLS, ECR scanning and
  immutable tags, no `*` on `*` grants, no static credentials, retainData.

Everything is rendered once per session by the real `elastic-training synth`, stacks side by
side, and the scanners run side by side too.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import is_gpu_stack, load_settings
from elastic_training.elasticjob import TRAINING_COMPONENT
from infra.specs import elastic as elastic_specs
from infra.specs import gpu as gpu_specs
from infra.specs.suppressions import (
    IMAGE_COMPONENTS,
    SUPPRESSIONS,
    TAG_PINNED_IMAGE,
    markdown_rows,
    pinned_by_tag,
    suppressions_for,
)
from infra.config.stack_file import read_stack_file
from scanner_helpers import (
    CHECKOV,
    HADOLINT,
    PYTHON,
    REPO,
    checkov_reports,
    checkov_results,
    component_of,
    credential_findings,
    describe_checks,
    dockerfiles,
    finish,
    hadolint_findings,
    load_manifests,
    pod_templates,
    policy_documents,
    repository_files,
    require_tool,
    selects,
    stack_names,
    star_on_star_statements,
    start,
)

STACKS = stack_names()


def stack_target(stack: str) -> str:
    """eks or existing."""
    return load_settings(read_stack_file(stack), stack).target


# The AWS-side checks apply to the stacks that create AWS resources; a stack of target existing
# creates none (tests/test_existing_target.py proves it), so it is not a case of them.
EKS_STACKS = [stack for stack in STACKS if stack_target(stack) == "eks"]
# One more render of dev with the protective settings on, to see them reach the resources.
HARDENED = "dev-hardened"
HARDENED_OVERRIDES = ["retainData=true", 'apiAllowedCidrs=["203.0.113.0/24","198.51.100.7/32"]']
# AWS-managed policies the stack attaches. Their documents live in AWS, not in resources.json, so
# they are an explicit list: none grants every action (AdministratorAccess would); a new one must
# be reviewed and added here.
REVIEWED_MANAGED_POLICIES = {
    "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy",
}
# The only pod that talks to the Kubernetes API, so the only one with a service account token.
API_CLIENT_SERVICE_ACCOUNTS = {elastic_specs.CONTROLLER_NAME}
# Pod Security levels per namespace: the workload namespace (the only one the stack creates; the
# controller runs there too) enforces, warns and audits on "restricted": the worker pods are the
# Job's template whole (tests/specs/test_pod_security.py proves it on the pods themselves).
PSA_LABELS = {
    "workloads": {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")},
}


@dataclass
class Rendered:
    name: str
    stack: str
    directory: Path
    stderr: str

    @cached_property
    def resources(self) -> list[dict[str, Any]]:
        return json.loads((self.directory / "resources.json").read_text())

    @cached_property
    def manifests(self) -> dict[Path, dict[str, Any]]:
        return load_manifests(self.directory / "manifests")

    def of_type(self, type_token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_token]

    def one(self, type_token: str) -> dict[str, Any]:
        (found,) = self.of_type(type_token)
        return found


# --- session fixtures: render, then scan ---------------------------------------------------


@pytest.fixture(scope="session")
def rendered(tmp_path_factory) -> dict[str, Rendered]:
    """Every stack in stacks/ (and dev with HARDENED_OVERRIDES), rendered side by side."""
    require_tool(PYTHON)
    root = tmp_path_factory.mktemp("security-synth")
    jobs = {stack: (stack, []) for stack in STACKS}
    jobs[HARDENED] = ("dev", HARDENED_OVERRIDES)
    running = {}
    for name, (stack, overrides) in jobs.items():
        command = [PYTHON, "-m", "infra.cli", "synth", stack, "--out", root / name]
        for override in overrides:
            command += ["-c", override]
        running[name] = start(command, REPO)
    results = {}
    for name, process in running.items():
        result = finish(process, timeout=180)
        assert result.returncode == 0, f"synth {name} failed:\n{result.stderr}"
        results[name] = Rendered(name, jobs[name][0], root / name, result.stderr)
    return results


@dataclass(repr=False)
class Scans:
    checkov: list[dict[str, Any]]  # one report per framework (kubernetes, dockerfile)
    root: Path  # what checkov scanned (see the fixture)
    hadolint: dict[Path, list[dict[str, Any]]]

    def checkov_results(self, framework: str, kind: str, under: str = "") -> list[dict[str, Any]]:
        """Results of one framework; `under` keeps those of files below root/<under>/."""
        reports = [r for r in self.checkov if r.get("check_type") == framework]
        prefix = str(self.root / under) + "/" if under else ""
        return [c for c in checkov_results(reports, kind) if c["file_abs_path"].startswith(prefix)]

    def __repr__(self) -> str:  # pytest prints fixtures in failures; the reports are megabytes
        return f"Scans(root={self.root})"


@pytest.fixture(scope="session")
def scans(rendered, tmp_path_factory) -> Scans:
    """One checkov run (two frameworks: checkov's start-up is most of its time) over a tree of
      manifests/<stack>/      every manifest of every stack, as synth wrote it
      unsuppressed/<stack>/   the objects that carry checkov.io/skip annotations, without them,
                              to prove each suppression still hides a failing check
      images/                 a copy of the repository's images/
    and hadolint over every Dockerfile beside it."""
    require_tool(CHECKOV)
    require_tool(HADOLINT)
    root = tmp_path_factory.mktemp("security-scan")
    tree = root / "scan"
    # Only the manifests: resources.json and outputs.json are not Kubernetes objects.
    for stack in STACKS:
        shutil.copytree(rendered[stack].directory / "manifests", tree / "manifests" / stack)
        for path, obj in rendered[stack].manifests.items():
            annotations = obj["metadata"].get("annotations", {})
            if any(key.startswith("checkov.io/skip") for key in annotations):
                bare = json.loads(json.dumps(obj))
                bare["metadata"]["annotations"] = {
                    k: v for k, v in annotations.items() if not k.startswith("checkov.io/skip")
                }
                (tree / "unsuppressed" / stack).mkdir(parents=True, exist_ok=True)
                (tree / "unsuppressed" / stack / path.name).write_text(yaml.safe_dump(bare, sort_keys=False))
    shutil.copytree(REPO / "images", tree / "images")
    # checkov runs from an empty folder, so no stray .checkov.yaml can apply.
    workdir = root / "cwd"
    workdir.mkdir()
    checkov = start(
        [CHECKOV, "-d", tree, "--framework", "kubernetes", "dockerfile", "--skip-download", "--compact", "-o", "json"],
        workdir,
    )
    hadolint = {path: start([HADOLINT, "-f", "json", path], REPO) for path in dockerfiles()}
    reports = checkov_reports(finish(checkov))
    # With nothing to scan for a framework checkov leaves its report out: add an empty one.
    for framework in ("kubernetes", "dockerfile"):
        if not [r for r in reports if r.get("check_type") == framework]:
            reports.append({"check_type": framework, "results": {}})
    return Scans(
        checkov=reports,
        root=tree,
        hadolint={path: hadolint_findings(finish(process)) for path, process in hadolint.items()},
    )


def manifests_by_scanned_file(scans: Scans) -> dict[str, dict[str, Any]]:
    """checkov's file_abs_path -> the object in that file, for every stack."""
    found = {}
    for stack in STACKS:
        for folder in ("manifests", "unsuppressed"):
            found.update({str(path): obj for path, obj in load_manifests(scans.root / folder / stack).items()})
    return found


# --- scanners ---------------------------------------------------------------------------------


def test_no_global_scanner_suppressions():
    """Suppressions are per object only: no config file that skips checks for the whole repo."""
    for name in (".checkov.yaml", ".checkov.yml", ".hadolint.yaml", ".hadolint.yml"):
        assert not (REPO / name).exists(), f"{name} would suppress checks globally; suppress on the object instead"


def test_checkov_kubernetes_zero_failures(scans):
    failed = scans.checkov_results("kubernetes", "failed_checks", under="manifests")
    assert not failed, f"checkov failed {len(failed)} check(s) on the rendered manifests:\n{describe_checks(failed)}"
    errors = scans.checkov_results("kubernetes", "parsing_errors")
    assert not errors, f"checkov could not parse: {errors}"


def test_checkov_scanned_every_stack_and_every_workload(scans):
    """Guard against a scan that passes because it read nothing."""
    passed = scans.checkov_results("kubernetes", "passed_checks", under="manifests")
    assert len(passed) > 300 * len(STACKS), len(passed)
    scanned = {Path(c["file_abs_path"]) for c in passed}
    for stack in STACKS:
        kinds = {
            obj["kind"] for path, obj in load_manifests(scans.root / "manifests" / stack).items() if path in scanned
        }
        assert {"Deployment", "StatefulSet", "Job", "Service", "ServiceAccount", "Role", "RoleBinding"} <= kinds, (
            stack,
            kinds,
        )


def test_every_suppression_is_explained_and_still_needed(scans, rendered):
    """Each skipped check comes from SUPPRESSIONS with its reason; and without the annotations
    exactly the suppressed checks fail on exactly those objects, on every stack: a fixed finding
    must take its suppression with it."""
    objects = manifests_by_scanned_file(scans)

    def key(check: dict[str, Any]) -> tuple[str, str, str, str]:
        obj = objects[check["file_abs_path"]]
        return Path(check["file_abs_path"]).parent.name, obj["kind"], component_of(obj), check["check_id"]

    skipped = scans.checkov_results("kubernetes", "skipped_checks", under="manifests")
    for check in skipped:
        _, kind, component, check_id = key(check)
        reasons = dict(suppressions_for(objects[check["file_abs_path"]]))
        assert check_id in reasons, f"{check_id} skipped on {check['resource']} but not in SUPPRESSIONS"
        assert check["check_result"]["suppress_comment"] == reasons[check_id], check
    # A suppressed object exists only in the stacks that render it (the device plugin: GPU stacks).
    present = {
        stack: {(obj["kind"], component_of(obj)) for obj in rendered[stack].manifests.values()} for stack in STACKS
    }
    assert not set(SUPPRESSIONS) - set().union(*present.values()), "suppressions for objects no stack renders"
    expected = {
        (stack, kind, component, check_id)
        for stack in STACKS
        for (kind, component), entries in SUPPRESSIONS.items()
        if (kind, component) in present[stack]
        for check_id, _ in entries
    }
    # Workloads that run an imageUri pinned by a tag (the local stack's kind-loaded image), read
    # from the rendered objects' images, not from their annotations.
    expected |= {
        (Path(path).parent.name, obj["kind"], component_of(obj), check_id)
        for path, obj in objects.items()
        if Path(path).parent.parent.name == "manifests"
        and (obj["kind"], component_of(obj)) in IMAGE_COMPONENTS
        and any(pinned_by_tag(c["image"]) for t in pod_templates(obj) for c in t["spec"]["containers"])
        for check_id, _ in TAG_PINNED_IMAGE
    }
    for stack in STACKS:
        if stack_target(stack) == "existing":  # the local stack runs a kind-loaded image by tag
            assert (stack, "Job", "data-prep", "CKV_K8S_43") in expected, stack
            assert (stack, "Deployment", "elastic-controller", "CKV_K8S_43") in expected, stack
    assert {key(c) for c in skipped} == expected
    failing_without = {key(c) for c in scans.checkov_results("kubernetes", "failed_checks", under="unsuppressed")}
    assert not expected - failing_without, (
        f"suppressions that hide no failure; remove them from SUPPRESSIONS: {sorted(expected - failing_without)}"
    )
    assert not failing_without - expected, f"unsuppressed failures: {sorted(failing_without - expected)}"


IMAGE_DOCKERFILE = REPO / "images" / "Dockerfile"


def test_checkov_dockerfile_zero_failures(scans):
    assert IMAGE_DOCKERFILE.is_file(), "images/Dockerfile is missing: the registry builds the image from it"
    failed = scans.checkov_results("dockerfile", "failed_checks")
    assert not failed, f"checkov failed {len(failed)} check(s) on images/:\n{describe_checks(failed)}"
    passed = scans.checkov_results("dockerfile", "passed_checks")
    assert {Path(c["file_abs_path"]).name for c in passed} >= {"Dockerfile"}, "checkov scanned no Dockerfile in images/"


def test_hadolint_every_dockerfile_clean(scans):
    assert IMAGE_DOCKERFILE.is_file(), "images/Dockerfile is missing: the registry builds the image from it"
    assert IMAGE_DOCKERFILE in scans.hadolint, sorted(scans.hadolint)
    findings = {path: found for path, found in scans.hadolint.items() if found}
    assert not findings, "hadolint:\n" + "\n".join(
        f"  {path.relative_to(REPO)}:{f['line']} {f['code']} ({f['level']}) {f['message']}"
        for path, found in findings.items()
        for f in found
    )


# --- what checkov cannot see --------------------------------------------------------------


def all_pods(stack: Rendered) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(owner object, pod template) for every pod the stack runs, the ElasticJob's included
    (checkov has no checks for custom resources, so its pods are checked only here)."""
    return [(obj, template) for obj in stack.manifests.values() for template in pod_templates(obj)]


# The one pod that needs the node itself: the NVIDIA device plugin (GPU stacks, infra/specs/gpu.py)
# creates its socket in the kubelet's root-owned device-plugin directory, a hostPath, so it runs as
# root in kube-system. Only those two exceptions are allowed; every other check applies to it too.
NODE_AGENTS = {("DaemonSet", gpu_specs.DEVICE_PLUGIN_COMPONENT): gpu_specs.DEVICE_PLUGIN_DIR}


def node_agent_dir(obj: dict[str, Any]) -> str | None:
    return NODE_AGENTS.get((obj["kind"], component_of(obj)))


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_is_hardened(rendered, stack):
    pods = all_pods(rendered[stack])
    gpu_stack = is_gpu_stack(load_settings(read_stack_file(stack), stack))
    assert {obj["kind"] for obj, _ in pods} == {"Deployment", "StatefulSet", "Job", "ElasticJob"} | (
        {"DaemonSet"} if gpu_stack else set()
    )
    for obj, template in pods:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        spec = template["spec"]
        pod_context = spec.get("securityContext", {})
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(flag), (where, flag)
        host_paths = [v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v]
        agent_dir = node_agent_dir(obj)
        assert host_paths == ([agent_dir] if agent_dir else []), where
        assert pod_context.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        if agent_dir:  # root, see NODE_AGENTS; the container checks below still apply
            assert obj["metadata"]["namespace"] == "kube-system", where
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}, (
                    where
                )
                assert context["readOnlyRootFilesystem"] is True and not context.get("privileged"), where
                assert {m["mountPath"] for m in container["volumeMounts"]} == {agent_dir}, where
            continue
        assert pod_context.get("runAsUser", 0) >= 10000 and pod_context.get("runAsGroup", 0) >= 10000, where
        talks_to_api = spec.get("serviceAccountName") in API_CLIENT_SERVICE_ACCOUNTS
        assert spec.get("automountServiceAccountToken") is (None if talks_to_api else False), where
        for container in spec.get("initContainers", []) + spec["containers"]:
            context = container["securityContext"]
            where_c = f"{where} container {container['name']}"
            resources = container["resources"]
            assert set(resources["requests"]) >= {"cpu", "memory"} and set(resources["limits"]) >= {"cpu", "memory"}, (
                where_c
            )
            assert context["runAsNonRoot"] is True or pod_context.get("runAsNonRoot") is True, where_c
            assert context["allowPrivilegeEscalation"] is False, where_c
            assert context["capabilities"] == {"drop": ["ALL"]}, where_c
            assert context["readOnlyRootFilesystem"] is True, where_c
            assert not context.get("privileged"), where_c
            assert context.get("seccompProfile") == {"type": "RuntimeDefault"}, where_c
            assert not [p for p in container.get("ports", []) if "hostPort" in p], where_c
            # Read-only root: every writable path is a volume.
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            if obj["kind"] in ("Job", "ElasticJob"):
                assert "/tmp" in mounts, where_c


@pytest.mark.parametrize("stack", STACKS)
def test_namespaces_enforce_their_pod_security_standard_and_warn_on_restricted(rendered, stack):
    manifests = rendered[stack].manifests.values()
    namespaces = {obj["metadata"]["name"]: obj for obj in manifests if obj["kind"] == "Namespace"}
    settings = load_settings(read_stack_file(stack), stack)
    assert set(namespaces) == {settings.namespace}
    for obj in namespaces.values():
        labels = obj["metadata"]["labels"]
        expected = PSA_LABELS[component_of(obj)]
        assert {k: labels.get(k) for k in expected} == expected, obj["metadata"]["name"]
    for obj in manifests:
        if "namespace" in obj["metadata"]:
            # The device plugin (and its NetworkPolicy) alone live in kube-system, unlabelled, i.e.
            # privileged: its hostPath is refused by baseline (test_every_pod_is_hardened, NODE_AGENTS).
            if component_of(obj) == gpu_specs.DEVICE_PLUGIN_COMPONENT:
                assert obj["metadata"]["namespace"] == "kube-system"
                continue
            assert obj["metadata"]["namespace"] in namespaces, (
                f"{obj['kind']}/{obj['metadata']['name']} outside our namespaces"
            )


def ingress_policies(stack: Rendered, namespace: str) -> list[dict[str, Any]]:
    return [
        obj
        for obj in stack.manifests.values()
        if obj["kind"] == "NetworkPolicy"
        and obj["metadata"]["namespace"] == namespace
        and "Ingress" in obj["spec"]["policyTypes"]
    ]


def pod_labels(stack: Rendered, kind: str, component: str) -> tuple[str, dict[str, str]]:
    (found,) = [
        (obj["metadata"]["namespace"], t["metadata"]["labels"])
        for obj, t in all_pods(stack)
        if obj["kind"] == kind and component_of(obj) == component
    ]
    return found


def admitted_from(
    policies: list[dict[str, Any]], target: dict[str, str], source: dict[str, str], port: int | None = None
) -> bool:
    """Would a pod labelled `source` (same namespace) reach a pod labelled `target` on `port`?"""
    selecting = [p for p in policies if selects(p["spec"]["podSelector"], target)]
    assert selecting, f"no NetworkPolicy selects {target}: all ingress would be open"
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            peers_ok = "from" not in rule or any(
                "podSelector" in peer and "namespaceSelector" not in peer and selects(peer["podSelector"], source)
                for peer in rule["from"]
            )
            ports_ok = "ports" not in rule or port is None or any(p.get("port") == port for p in rule["ports"])
            if peers_ok and ports_ok:
                return True
    return False


@pytest.mark.parametrize("stack", STACKS)
def test_network_policies_admit_only_what_is_needed(rendered, stack):
    """Every pod is selected by an ingress policy; the rendezvous store (unauthenticated) admits only
    training workers, on its port; workers reach each other; nothing else gets in."""
    synth = rendered[stack]
    for obj, template in all_pods(synth):
        namespace = obj["metadata"]["namespace"]
        assert [
            p
            for p in ingress_policies(synth, namespace)
            if selects(p["spec"]["podSelector"], template["metadata"]["labels"])
        ], f"no ingress NetworkPolicy selects the pods of {obj['kind']}/{obj['metadata']['name']}"
    namespace, store = pod_labels(synth, "StatefulSet", "rendezvous")
    _, worker = pod_labels(synth, "ElasticJob", TRAINING_COMPONENT)
    _, prep = pod_labels(synth, "Job", "data-prep")
    _, evaluation = pod_labels(synth, "Job", "evaluation")
    _, controller = pod_labels(synth, "Deployment", "elastic-controller")
    policies = ingress_policies(synth, namespace)
    assert admitted_from(policies, store, worker, elastic_specs.STORE_PORT)
    assert admitted_from(policies, worker, worker, 29500)
    for outsider in (prep, evaluation, {"run": "debug-shell"}):
        assert not admitted_from(policies, store, outsider, elastic_specs.STORE_PORT), outsider
        assert not admitted_from(policies, worker, outsider, 29500), outsider
    for inside in (prep, evaluation):
        assert not admitted_from(policies, inside, worker), inside
    assert not admitted_from(policies, controller, {"run": "debug-shell"}, 8080)  # it serves nothing


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_the_cluster_enforces_network_policies(rendered, stack):
    """Without the VPC CNI's network policy agent, NetworkPolicies are stored and ignored. (On
    target existing the cluster's CNI is its owner's: .github/workflows/e2e-kind.yml checks kind's.)"""
    cluster = rendered[stack].one("eks:index:Cluster")["inputs"]
    assert cluster["useDefaultVpcCni"] is False
    assert cluster["vpcCniOptions"]["enableNetworkPolicy"] is True


# --- AWS side ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*EKS_STACKS, HARDENED])
def test_eks_secrets_encrypted_and_endpoint_limited(rendered, name):
    synth = rendered[name]
    cluster = synth.one("eks:index:Cluster")["inputs"]
    (key,) = synth.of_type("aws:kms/key:Key")
    assert key["inputs"]["enableKeyRotation"] is True
    assert cluster["encryptionConfigKeyArn"].startswith("arn:aws:kms:") and ":key/" in cluster["encryptionConfigKeyArn"]
    assert cluster["endpointPrivateAccess"] is True
    expected = (
        ["203.0.113.0/24", "198.51.100.7/32"]
        if name == HARDENED
        else list(load_settings(read_stack_file(synth.stack), synth.stack).api_allowed_cidrs)
    )
    assert cluster["publicAccessCidrs"] == expected
    assert cluster["nodeAssociatePublicIpAddress"] is False


def test_open_api_endpoint_warns_and_a_restricted_one_does_not(rendered):
    assert "warning: config elastic-training:apiAllowedCidrs includes 0.0.0.0/0" in rendered["dev"].stderr
    assert "warning" not in rendered[HARDENED].stderr


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_efs_encrypted_at_rest_and_in_transit(rendered, stack):
    synth = rendered[stack]
    (file_system,) = synth.of_type("aws:efs/fileSystem:FileSystem")
    assert file_system["inputs"]["encrypted"] is True
    (volume,) = [obj for obj in synth.manifests.values() if obj["kind"] == "PersistentVolume"]
    assert volume["spec"]["mountOptions"] == ["tls"]
    (policy,) = synth.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")
    document = json.loads(policy["inputs"]["policy"])
    denies = [
        s
        for s in document["Statement"]
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert denies and denies[0]["Action"] == "*" and denies[0]["Principal"] == {"AWS": "*"}
    assert denies[0]["Resource"].startswith("arn:aws:elasticfilesystem:")
    # NFS reaches the mount targets only from the nodes' security group, never from a CIDR.
    for rule in synth.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        assert "cidrIpv4" not in rule["inputs"] and rule["inputs"]["referencedSecurityGroupId"].startswith("sg-")


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_ecr_scans_on_push_with_immutable_tags(rendered, stack):
    synth = rendered[stack]
    (repository,) = synth.of_type("aws:ecr/repository:Repository")
    assert repository["inputs"]["imageScanningConfiguration"] == {"scanOnPush": True}
    # Every tag immutable except the content tags, which a rebuild from another checkout pushes
    # again (tests/components/test_ecr_tag_rule.py).
    assert repository["inputs"]["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
    assert repository["inputs"]["imageTagMutabilityExclusionFilters"] == [{"filter": "src-*", "filterType": "WILDCARD"}]
    # Workloads use the digest, so a moved content tag changes no pod.
    image_ref = json.loads((synth.directory / "outputs.json").read_text())["imageRef"]
    assert "@sha256:" in image_ref


@pytest.mark.parametrize("name", [*EKS_STACKS, HARDENED])
def test_no_policy_grants_every_action_on_every_resource(rendered, name):
    documents = 0
    for resource in rendered[name].resources:
        for where, document in policy_documents(resource["inputs"]):
            documents += 1
            assert not star_on_star_statements(document), f"{resource['type']} {resource['name']} {where}: {document}"
        if resource["type"] == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            assert resource["inputs"]["policyArn"] in REVIEWED_MANAGED_POLICIES, resource["inputs"]["policyArn"]
    assert documents >= 5  # trust policies, the KMS policy, the EFS file system policy were all read


def test_star_on_star_detector_catches_a_broad_grant():
    broad = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    assert star_on_star_statements(broad)
    assert star_on_star_statements({"Statement": {"Effect": "Allow", "NotAction": "iam:*", "Resource": ["*"]}})
    assert not star_on_star_statements({"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*"}]})
    assert list(policy_documents({"inlinePolicies": [{"policy": json.dumps(broad)}]})) == [
        ("inlinePolicies[0].policy", broad)
    ]


def test_no_static_aws_credentials_in_the_repository_or_rendered_output(rendered):
    files = repository_files() + [
        path for synth in rendered.values() for path in synth.directory.rglob("*") if path.is_file()
    ]
    assert len(files) > 50
    found = {}
    for path in files:
        hits = credential_findings(path.read_text(errors="ignore"))
        if hits:
            found[str(path)] = hits
    assert not found, f"static AWS credentials (use IRSA roles or OIDC instead): {found}"


def test_credential_detector_catches_planted_keys():
    # Built at run time so this file holds no credential-shaped text itself (AWS's documented examples).
    key_id = "AKIA" + "IOSFODNN7EXAMPLE"
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
    assert credential_findings(f"id = {key_id}")
    assert credential_findings(f"aws_secret_access_key = {secret}")
    assert credential_findings(f'AWS_SECRET_ACCESS_KEY: "{secret}"')
    assert credential_findings("config:\n  aws:" + "secretKey: abc\n")
    assert not credential_findings("AWS_SECRET_ACCESS_KEY is never set; CI uses OIDC")


def test_retain_data_keeps_the_file_system_and_the_repository(rendered):
    """retainData=true: `pulumi destroy` leaves EFS (and its access point) and ECR in the account
    and does not empty the repository; not `protect`, so destroy still completes. Default: both go."""

    def state(synth: Rendered) -> dict[str, tuple[bool, bool]]:
        kept = {
            "aws:efs/fileSystem:FileSystem",
            "aws:efs/accessPoint:AccessPoint",
            "aws:ecr/repository:Repository",
            "aws:s3/bucket:Bucket",
        }
        return {r["type"]: (r["retainOnDelete"], r["protect"]) for r in synth.resources if r["type"] in kept}

    assert set(state(rendered["dev"]).values()) == {(False, False)}
    assert state(rendered[HARDENED]) == {
        "aws:efs/fileSystem:FileSystem": (True, False),
        "aws:efs/accessPoint:AccessPoint": (True, False),
        "aws:ecr/repository:Repository": (True, False),
        "aws:s3/bucket:Bucket": (True, False),
    }
    assert rendered["dev"].one("aws:ecr/repository:Repository")["inputs"]["forceDelete"] is True
    assert rendered[HARDENED].one("aws:ecr/repository:Repository")["inputs"]["forceDelete"] is False
    # Nothing else is retained: the rest of the stack is deleted as usual.
    assert sorted(r["type"] for r in rendered[HARDENED].resources if r["retainOnDelete"] or r["protect"]) == sorted(
        state(rendered[HARDENED])
    )


# --- docs -----------------------------------------------------------------------------------


def test_security_doc_lists_every_suppression():
    text = (REPO / "docs" / "security.md").read_text()
    missing = [row for row in markdown_rows() if row not in text]
    assert not missing, (
        "docs/security.md lacks suppression rows (regenerate: .venv/bin/python scripts/docs.py):\n" + "\n".join(missing)
    )
    for topic in ("retainData", "apiAllowedCidrs", "rendezvous store", "NetworkPolicy", "Threat model"):
        assert topic in text, topic
