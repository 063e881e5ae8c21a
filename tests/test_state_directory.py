"""Every documented way to a first `pulumi up` creates the file backend's directory before Pulumi
needs it (upstream-facts-2.md, fact 6).

Pulumi's file backend does not create its directory. pulumi/pulumi @ 1b5949891b
pkg/backend/diy/backend.go massageBlobPath turns `file://PATH` into an absolute path (relative to the
working directory, `~` expanded) and adds `no_tmp_dir=true`, never `create_dir`; go-cloud
blob/fileblob/fileblob.go openBucket (google/go-cloud @ 29ba3487e2) then stats the directory and
returns the error unless the URL sets `create_dir`. pulumi/actions only warns when its login fails,
so the next command fails the same way. So a fresh clone has no state until something makes
`.pulumi-state/`: each path below is read from the files (workflow steps in order, README sections
in order, scripts line by line) and must create the directory before its first command that
creates or logs in to state.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from infra.cli.deploy import STATE_DIR
import yaml

from synth_support import REPO

WORKSPACE = Path("/home/runner/work/elastic-training/elastic-training")  # any absolute checkout path


def state_directory(url: str, cwd: Path) -> tuple[Path, bool] | None:
    """massageBlobPath + fileblob's options: the directory a file:// URL opens, and whether go-cloud
    would create it (create_dir set); None for another backend."""
    if not url.startswith("file://"):
        return None
    query = parse_qs(urlsplit(url).query)
    path = url.removeprefix("file://").split("?")[0]
    if path.startswith("~"):
        path = str(Path.home()) if path == "~" else os.path.join(Path.home(), path[2:])
    return Path(os.path.normpath(cwd / path)), bool(query.get("create_dir", [""])[0])


def project_backend() -> str:
    return yaml.safe_load((REPO / "Pulumi.yaml").read_text())["backend"]["url"]


def directories_made_by(script: Path, cwd: Path) -> set[Path]:
    """`mkdir -p DIR` lines of a script that runs from the repository root."""
    return {
        Path(os.path.normpath(cwd / word))
        for line in script.read_text().splitlines()
        for match in [re.match(r"\s*mkdir -p (.+)$", line)]
        if match
        for word in shlex.split(match[1])
    }


# Commands that make or open state for the first time (the ones a fresh clone runs first).
FIRST_USE = re.compile(r"\bpulumi (login|stack init|stack select [^\n]*(--create|-c)\b|up)\b")


def created_by_command(command: str, cwd: Path, expand: dict[str, str]) -> set[Path]:
    """What a shell line creates: `mkdir -p` directories, and those of the scripts it runs."""
    for name, value in expand.items():
        command = command.replace(name, value)
    made: set[Path] = set()
    for match in re.finditer(r"\bmkdir -p ([^;&|\n#]+)", command):
        made |= {Path(os.path.normpath(cwd / word)) for word in shlex.split(match[1])}
    for script in re.findall(r"\bbash (scripts/\w[\w-]*\.sh)\b", command):
        made |= directories_made_by(REPO / script, cwd)
    # `elastic-training up|destroy` make Pulumi.yaml's state directory before any pulumi command
    # (infra/cli/deploy.py STATE_DIR; tests/cli/test_command.py runs it and checks the directory).
    if re.search(r"\belastic-training (up|destroy)\b", command):
        made.add(Path(os.path.normpath(cwd / STATE_DIR)))
    return made


def needs_directory(command: str, cwd: Path) -> Path | None:
    """The state directory a first-use pulumi command opens, when it is a file backend that go-cloud
    will not create; None otherwise."""
    if not FIRST_USE.search(command):
        return None
    login = re.search(r"\bpulumi login\b(?: +(\S+))?", command)
    if login and not login[1]:
        return None  # a bare `pulumi login` is Pulumi Cloud
    url = login[1].strip("'\"") if login else project_backend()
    opened = state_directory(url, cwd)
    return opened[0] if opened and not opened[1] else None


# --- the model itself --------------------------------------------------------------------------


def test_the_url_rules():
    assert state_directory("file://./.pulumi-state", WORKSPACE) == (WORKSPACE / ".pulumi-state", False)
    assert state_directory("file:///tmp/state?create_dir=true", WORKSPACE) == (Path("/tmp/state"), True)
    assert state_directory("s3://bucket", WORKSPACE) is None
    assert needs_directory("pulumi up -s local", WORKSPACE) == WORKSPACE / ".pulumi-state"
    assert needs_directory("pulumi login s3://my-org-pulumi-state && pulumi stack init dev", WORKSPACE) is None
    assert needs_directory("pulumi destroy -s dev", WORKSPACE) is None  # an existing stack's state exists


# --- workflows -----------------------------------------------------------------------------------


def workflow_paths() -> list:
    return [
        pytest.param(path, job_name, id=f"{path.name}:{job_name}")
        for path in sorted((REPO / ".github" / "workflows").glob("*.yml"))
        for job_name in yaml.safe_load(path.read_text())["jobs"]
    ]


def step_uses_state(step: dict, env: dict[str, str]) -> Path | None:
    """The directory a pulumi/actions step or a `run` step opens, when it is an uncreated file backend."""
    expand = {"${{ github.workspace }}": str(WORKSPACE), "${GITHUB_WORKSPACE}": str(WORKSPACE)}
    if str(step.get("uses", "")).startswith("pulumi/actions@"):
        inputs = step.get("with") or {}
        if "command" not in inputs and "cloud-url" not in inputs:
            return None  # only installs the CLI
        url = str(inputs.get("cloud-url") or env.get("PULUMI_BACKEND_URL") or project_backend())
        for name, value in expand.items():
            url = url.replace(name, value)
        opened = state_directory(url, WORKSPACE)
        return opened[0] if opened and not opened[1] else None
    run = str(step.get("run", ""))
    if "PULUMI_BACKEND_URL" in env and not str(env["PULUMI_BACKEND_URL"]).startswith("file://"):
        return None  # the variable takes precedence over Pulumi.yaml's backend
    for line in run.splitlines():
        for name, value in expand.items():
            line = line.replace(name, value)
        if (needed := needs_directory(line, WORKSPACE)) is not None:
            return needed
    return None


@pytest.mark.parametrize("path, job_name", workflow_paths())
def test_each_workflow_creates_the_state_directory_before_using_it(path, job_name):
    workflow = yaml.safe_load(path.read_text())
    job = workflow["jobs"][job_name]
    env = {**(workflow.get("env") or {}), **(job.get("env") or {})}
    made: set[Path] = set()
    expand = {"${{ github.workspace }}": str(WORKSPACE), "${GITHUB_WORKSPACE}": str(WORKSPACE)}
    for step in job.get("steps", []):
        needed = step_uses_state(step, {**env, **(step.get("env") or {})})
        assert needed is None or needed in made, (
            f"{path.name} step {step.get('name')!r} opens {needed}, which no earlier step creates"
        )
        made |= created_by_command(str(step.get("run", "")), WORKSPACE, expand)


def test_the_e2e_workflow_is_one_that_uses_the_file_backend():
    """So the check above is not vacuous: e2e-kind's `pulumi up` logs in to a file:// directory."""
    job = yaml.safe_load((REPO / ".github" / "workflows" / "e2e-kind.yml").read_text())["jobs"]["e2e"]
    assert [step_uses_state(s, {}) for s in job["steps"] if step_uses_state(s, {})] == [WORKSPACE / ".pulumi-state"] * 2


# --- README and scripts ----------------------------------------------------------------------------

INLINE_FIRST_USE = re.compile(r"\bpulumi (login \S|stack init|stack select [^`]*(--create|-c)\b)")


DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def readme_sections() -> list[tuple[str, list[str]]]:
    """(file: title, commands in order) per `## ` section of README.md and every docs page: lines of
    fenced blocks and inline code spans. A reader may start at any section, so each must stand on its own."""
    sections = []
    for document in DOCUMENTS:
        for chunk in re.split(r"^## ", document.read_text(), flags=re.M)[1:]:
            title, _, body = chunk.partition("\n")
            commands = []
            for fenced, inline in re.findall(r"```[a-z]*\n(.*?)```|`([^`\n]+)`", body, flags=re.S):
                # Prose names `pulumi up` everywhere; an inline span is a step to run when it makes state.
                commands += fenced.splitlines() if fenced else [inline] if INLINE_FIRST_USE.search(inline) else []
            sections.append((f"{document.relative_to(REPO)}: {title}", commands))
    return sections


@pytest.mark.parametrize(
    "title, commands", readme_sections(), ids=lambda value: value if isinstance(value, str) else ""
)
def test_each_readme_path_creates_the_state_directory_first(title, commands):
    if any("PULUMI_BACKEND_URL" in command for command in commands):
        return  # a section about a shared backend: the variable overrides Pulumi.yaml's file backend
    made: set[Path] = set()
    for line in commands:
        for command in re.split(r"&&|;", line.split("#")[0]):  # `mkdir -p d && pulumi ...` runs in order
            needed = needs_directory(command, WORKSPACE)
            assert needed is None or needed in made, f"section {title!r}: `{command.strip()}` before {needed} exists"
            made |= created_by_command(command, WORKSPACE, {})


def test_the_readme_paths_that_start_state_are_found():
    """Getting started (inline `pulumi stack init`), the kind quick start and the CI settings (their pulumi commands)."""
    starting = {
        title
        for title, commands in readme_sections()
        if any(needs_directory(command.split("#")[0], WORKSPACE) for command in commands)
    }
    assert {
        "docs/getting-started.md: 2. Choose and change the config, before the first `up`",
        "docs/your-own-cluster.md: kind quick start",
        "docs/ci.md: Settings to create",
    } <= starting


@pytest.mark.parametrize("script", sorted((REPO / "scripts").glob("*.sh")), ids=lambda p: p.name)
def test_each_script_creates_the_state_directory_first(script):
    made: set[Path] = set()
    for line in script.read_text().splitlines():
        code = line.split("#")[0]
        needed = needs_directory(code, WORKSPACE)
        assert needed is None or needed in made, f"{script.name}: `{line.strip()}` before {needed} exists"
        made |= created_by_command(code, WORKSPACE, {})
