"""Helpers for tests/test_security_scanners.py: running the scanners, reading their reports, and
reading rendered stacks (label selectors, pod templates, IAM policy documents, credentials).

Plain functions, no fixtures: the fixtures live in the test file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Iterator

import yaml

REPO = Path(__file__).resolve().parent.parent
STACKS_DIR = REPO / "stacks"
PYTHON = REPO / ".venv" / "bin" / "python"
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"
HADOLINT = REPO / ".venv" / "bin" / "hadolint"
# Directories that hold other people's code (virtualenvs) or nothing of ours.
NOT_OURS = {".git", ".venv", ".venv-checkov", "node_modules", "__pycache__", ".pytest_cache", ".pulumi-state"}


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def require_tool(path: Path) -> None:
    """A missing scanner fails the test (a skipped scan would read as a clean one)."""
    assert path.is_file() and os.access(path, os.X_OK), (
        f"{path.relative_to(REPO)} is missing: run `bash scripts/setup.sh && bash scripts/setup-scanners.sh`"
    )


def start(command: list[Any], cwd: Path) -> subprocess.Popen:
    """Start a command without waiting, so independent scans and synths run side by side."""
    return subprocess.Popen(
        [str(c) for c in command], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def dockerfiles() -> list[Path]:
    """Every Dockerfile in the repository (Dockerfile, Dockerfile.*, *.Dockerfile), virtualenvs aside."""
    found = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if d not in NOT_OURS]  # do not descend into virtualenvs
        found += [
            Path(folder) / name
            for name in files
            if name == "Dockerfile" or name.startswith("Dockerfile.") or name.endswith(".Dockerfile")
        ]
    return sorted(found)


# --- checkov --------------------------------------------------------------------------------


def checkov_reports(result: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    """checkov -o json prints one report (a dict) or, for several frameworks, a list of them.
    Exit status 0 is clean and 1 is "checks failed"; anything else, or no JSON, is a crash."""
    assert result.returncode in (0, 1), f"checkov crashed (exit {result.returncode}):\n{result.stderr[-3000:]}"
    try:
        parsed = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"checkov printed no JSON:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}") from None
    return parsed if isinstance(parsed, list) else [parsed]


def checkov_results(reports: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """kind: passed_checks, failed_checks, skipped_checks or parsing_errors, over every report."""
    return [item for report in reports for item in report.get("results", {}).get(kind, [])]


def describe_checks(checks: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {c['check_id']} {c['check_name']!r} on {c['resource']} ({c['file_path']})" for c in checks)


# --- hadolint -------------------------------------------------------------------------------


def hadolint_findings(result: subprocess.CompletedProcess) -> list[dict[str, Any]]:
    """hadolint -f json: a JSON list of findings; exit 1 means there are findings."""
    assert result.returncode in (0, 1), f"hadolint crashed (exit {result.returncode}):\n{result.stderr}"
    return json.loads(result.stdout or "[]")


# --- rendered Kubernetes objects ------------------------------------------------------------


def load_manifests(directory: Path) -> dict[Path, dict[str, Any]]:
    return {path: yaml.safe_load(path.read_text()) for path in sorted(directory.glob("*.yaml"))}


def component_of(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component", "")


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates an object creates pods from (Deployment, Job, ElasticJob replicas)."""
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        return [spec["template"]]
    if obj["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]]
    if obj["kind"] == "ElasticJob":
        return [replica["template"] for replica in spec["replicaSpecs"].values()]
    assert obj["kind"] != "Pod", "the stack should create pods through controllers, not bare Pods"
    return []


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics (matchLabels AND matchExpressions; {} selects all)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
    return True


# --- IAM policy documents -------------------------------------------------------------------


def policy_documents(value: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every IAM-style policy document anywhere in a resource's inputs: a JSON string or a dict
    with a Statement, whatever the input is called (policy, assumeRolePolicy, inlinePolicies...)."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return
    if isinstance(value, dict):
        if "Statement" in value:
            yield where, value
            return
        for key, item in value.items():
            yield from policy_documents(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from policy_documents(item, f"{where}[{index}]")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def star_on_star_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Allow statements that grant every action on every resource (NotAction/NotResource count too)."""
    found = []
    for statement in _as_list(document["Statement"]):
        if statement.get("Effect") != "Allow":
            continue
        every_action = "NotAction" in statement or any(a in ("*", "*:*") for a in _as_list(statement.get("Action", [])))
        every_resource = "NotResource" in statement or "*" in _as_list(statement.get("Resource", []))
        if every_action and every_resource:
            found.append(statement)
    return found


# --- static AWS credentials -----------------------------------------------------------------
# Written so that this file does not match them itself: the key-id pattern needs 16 more
# upper-case letters or digits after the prefix, the secret patterns a value after the name.
STATIC_CREDENTIAL_PATTERNS = {
    "AWS access key id": re.compile(r"\b(AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    "aws_secret_access_key with a value": re.compile(
        r"aws_?secret_?access_?key\s*[\"']?\s*[=:]\s*[\"']?[A-Za-z0-9/+]{40}", re.IGNORECASE
    ),
    "Pulumi aws:secretKey/accessKey/token config": re.compile(r"^\s*aws:(secretKey|accessKey|token)\s*:", re.MULTILINE),
}


def credential_findings(text: str) -> list[str]:
    return [
        f"{name}: {match.group(0)[:24]}..."
        for name, pattern in STATIC_CREDENTIAL_PATTERNS.items()
        for match in pattern.finditer(text)
    ]


def repository_files() -> list[Path]:
    """Tracked and untracked-but-not-ignored files: what a commit could carry."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    return [REPO / name for name in listed if name and (REPO / name).is_file()]
