"""The training image's inputs. hadolint and checkov scan images/Dockerfile in
tests/test_security_scanners.py; here, what they cannot know."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

from torchrun_harness import REPO_ROOT

DOCKERFILE = REPO_ROOT / "images" / "Dockerfile"
# docker-library/official-images, library/python at commit 37079fb336f572a88700cf32e5e1f6be54a04e8f
# (2026-08-21): the 3.11 series is `3.11.16-slim-bookworm` (added by 73f67818, "Update python
# (#22049)", 2026-08-13; 3.11.15 replaced 3.11.14 in 6536bc3b on 2026-03-03). The official images
# rebuild only the listed tag, so an older patch tag gets no more Debian updates.
CURRENT_3_11_PATCH = 16
BASE_TAG = re.compile(r"python:3\.11\.(\d+)-slim-bookworm(@sha256:[0-9a-f]{64})?")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of images/Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def shell_commands(run: str) -> list[list[str]]:
    """The simple commands of a RUN line (split at && and ;)."""
    return [part.split() for part in re.split(r"&&|;", run) if part.strip()]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_image_requirements_are_the_jobs_extra():
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["jobs"]
    lines = (REPO_ROOT / "images" / "requirements.txt").read_text().splitlines()
    requirements = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert sorted(requirements) == sorted(extra)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9.]*", line) for line in requirements), (
        "pin every package exactly"
    )


def test_build_context_holds_only_the_contract_jobs_and_controller_packages_and_requirements():
    rules = [
        line for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert rules[0] == "*", "deny everything first, then allow what the image needs"
    assert {rule for rule in rules if rule.startswith("!")} == {
        "!elastic_training/",
        "!jobs/",
        "!controller/",
        "!images/requirements.txt",
    }


def test_image_runs_jobs_as_a_non_root_user_without_installers():
    dockerfile = (REPO_ROOT / "images" / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert re.search(r"^USER 10001:10001$", final_stage, re.MULTILINE)
    assert "pip uninstall --yes pip" in final_stage and "apt-get" not in dockerfile
    assert "COPY --from=build /opt/venv /opt/venv" in final_stage and "HOME=/tmp" in final_stage


def test_base_image_is_the_current_patch_tag_and_the_docs_agree():
    dockerfile = DOCKERFILE.read_text()
    (default,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, re.MULTILINE)
    match = BASE_TAG.fullmatch(default)
    assert match, f"BASE_IMAGE must be an exact python:3.11.<patch>-slim-bookworm tag, got {default}"
    assert int(match.group(1)) >= CURRENT_3_11_PATCH, (
        f"{default} is superseded: official-images lists python:3.11.{CURRENT_3_11_PATCH}-slim-bookworm"
    )
    # checkov's suppression and the docs (the training image, docs/commands/jobs.md) name the same image.
    (skipped,) = re.findall(r"checkov:skip=CKV_DOCKER_7:BASE_IMAGE defaults to (\S+)", dockerfile)
    assert skipped == default
    documented = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    doc_tags = [tag for path in documented for tag in re.findall(r"python:3\.11[\w.@:-]*", path.read_text())]
    assert doc_tags and set(doc_tags) == {default}, f"the docs name {sorted(set(doc_tags))}, the Dockerfile {default}"
    # How to bump it and how to add a digest that was really read.
    assert "library/python" in dockerfile and "docker buildx imagetools inspect" in dockerfile


def test_image_keeps_what_torch_requires_and_runs_pip_check():
    pinned = next(
        line
        for line in (REPO_ROOT / "images" / "requirements.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    # torch's own declaration (its wheel's METADATA, Requires-Dist), from the torch installed here.
    assert metadata.version("torch").split("+")[0] == pinned.split("==")[1]
    required = {
        canonical(re.match(r"[A-Za-z0-9_.-]+", req).group(0))
        for req in metadata.requires("torch") or []
        if "extra ==" not in req
    }
    assert "setuptools" in required  # torch 2.13.0: Requires-Dist: setuptools>=77.0.3

    instructions = dockerfile_instructions()
    final_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    removed_from_venv = set()
    venv_pip = {"/opt/venv/bin/pip", "/opt/venv/bin/python"}
    for _, run in [item for item in instructions if item[0] == "RUN"]:
        for command in shell_commands(run):
            if command[0] in venv_pip and "uninstall" in command:
                removed_from_venv |= {
                    canonical(arg) for arg in command[command.index("uninstall") + 1 :] if not arg.startswith("-")
                }
    assert not removed_from_venv & required, (
        f"the image removes what torch requires: {sorted(removed_from_venv & required)}"
    )

    # `pip check` runs in the final stage on the virtualenv it ships, after that was copied in,
    # and nothing installs into it afterwards.
    final = instructions[final_from:]
    copy = final.index(("COPY", "--from=build /opt/venv /opt/venv"))
    checks = [
        i
        for i, (keyword, run) in enumerate(final)
        if keyword == "RUN"
        and any(c[:4] == ["/opt/venv/bin/python", "-m", "pip", "check"] for c in shell_commands(run))
    ]
    assert checks and checks[0] > copy, "the final stage must run `/opt/venv/bin/python -m pip check`"
    for _, run in [item for item in final[checks[0] :] if item[0] == "RUN"]:
        assert not any("install" in c for c in shell_commands(run)), "nothing may install after `pip check`"
