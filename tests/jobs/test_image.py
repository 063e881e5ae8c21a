"""The training image's inputs. hadolint and checkov scan images/Dockerfile in
tests/test_security_scanners.py; here, what they cannot know."""

from __future__ import annotations

import re
import tomllib

from torchrun_harness import REPO_ROOT


def test_image_requirements_are_the_jobs_extra():
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["jobs"]
    lines = (REPO_ROOT / "images" / "requirements.txt").read_text().splitlines()
    requirements = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert sorted(requirements) == sorted(extra)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9.]*", line) for line in requirements), "pin every package exactly"


def test_build_context_holds_only_the_jobs_package_and_requirements():
    rules = [line for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert rules[0] == "*", "deny everything first, then allow what the image needs"
    assert {rule for rule in rules if rule.startswith("!")} == {"!jobs/", "!images/requirements.txt"}


def test_image_runs_jobs_as_a_non_root_user_without_installers():
    dockerfile = (REPO_ROOT / "images" / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert re.search(r"^USER 10001:10001$", final_stage, re.MULTILINE)
    assert "pip uninstall --yes pip" in final_stage and "apt-get" not in dockerfile
    assert "COPY --from=build /opt/venv /opt/venv" in final_stage and "HOME=/tmp" in final_stage
