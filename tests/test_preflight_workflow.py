"""preview.yml runs preflight for every previewed stack and puts its table in the job summary (issue 9).

The step's shell runs here for real (`bash -e`, as the runner does) with a stand-in for
`.venv/bin/python` that answers with preflight's exit codes: 0 nothing failed, 1 a check failed,
2 bad config, 3 some checks could not run (infra/cli/preflight/)."""

from __future__ import annotations

import re

import pytest

from test_workflows import fake_tool, preview_job, preview_step, run_step, step_named, steps


def preflight_step() -> tuple[int, dict]:
    _, job = preview_job()
    found = [(i, s) for i, s in enumerate(steps(job)) if "elastic-training preflight" in str(s.get("run", ""))]
    assert len(found) == 1, "preview.yml needs one step running `elastic-training preflight`"
    return found[0]


def test_preflight_runs_after_the_install_and_before_the_preview_of_an_existing_stack():
    _, job = preview_job()
    index, step = preflight_step()
    install, _ = step_named(job, "Install the project")
    assert install < index < steps(job).index(preview_step(job))
    assert re.fullmatch(r"steps\.exists\.outputs\.found\s*==\s*'true'", str(step.get("if", "")).strip())
    assert '--markdown >> "${GITHUB_STEP_SUMMARY}"' in step["run"]


@pytest.mark.parametrize(
    "code, step_fails, warned",
    [(0, False, False), (1, False, True), (2, True, False), (3, False, True)],
    ids=["all-passed", "a-check-failed", "bad-config", "not-checked"],
)
def test_the_summary_gets_the_table_and_only_bad_config_fails_the_job(tmp_path, code, step_fails, warned):
    _, step = preflight_step()
    (tmp_path / "bin").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    fake_tool(
        tmp_path / ".venv" / "bin", "elastic-training", f'echo "| credentials | PASS | args: $* |"\nexit {code}\n'
    )
    summary = tmp_path / "summary.md"
    result, _ = run_step(step["run"], tmp_path, STACK="smoke", GITHUB_STEP_SUMMARY=str(summary))
    assert (result.returncode != 0) == step_fails, result.stderr
    assert "args: preflight smoke --markdown" in summary.read_text()
    assert ("::warning::preflight of stack smoke" in result.stdout) == warned
