"""Every repository path the docs, docstrings and comments name exists (issue 39: fourteen of them no
longer did, after files moved into tests/<layer>/ and jobs/<part>/).

What counts as a repository path: text starting with one of the repository's top folders
(`infra/`, `jobs/`, `tests/`, ...) in the Markdown pages and in the comments and docstrings of the
Python files (string literals in code are data, such as a test's made-up file names). Left out:
a path with a placeholder (`<stack>`, `{name}`, `*`), a line that names another repository's file
(it says `commit`, `@ <sha>` or a GitHub URL), and CHANGELOG.md, which records what was.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = (
    "infra",
    "jobs",
    "controller",
    "scripts",
    "tests",
    "docs",
    "images",
    "stacks",
    "benchmarks",
    ".github",
    "overrides",
)
PATH = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_./-]*[A-Za-z0-9_])" % "|".join(map(re.escape, TOP)))
# Words that look like paths: "50 images/s" is a rate.
UNITS = {"images/s"}
# Paths that are not this repository's, named where the line alone does not say so (a reference
# continued from the line before), each with what it is.
NOT_OURS = {
    "docs/parameters.md": "kubernetes-sigs/aws-ebs-csi-driver's page (docs/design-notes.md)",
    ".github/workflows/sync-eni-max-pods.yaml": "awslabs/amazon-eks-ami's workflow (infra/aws/eni_limits.py)",
    ".github/workflows/build-tutorials.yml": "pytorch/tutorials' workflow (infra/config/keys.py)",
    "scripts/step06-add-spot-role.sh": "the AWS workshop's script (tests/cli/test_preflight_spot_role.py)",
    "scripts/up.sh": "the script `elastic-training up` replaced (tests/cli/test_command.py)",
    "infra/.venv": "the wrong path Pulumi once looked for (tests/components/test_provider_host.py)",
    "stacks/Pulumi.mine.yaml": "a stack file the reader makes (docs/getting-started.md)",
}
OTHER_REPOSITORY = re.compile(r"\bcommit\b|@ ?[0-9a-f]{7,40}\b|github\.com/|\bupstream\b", re.IGNORECASE)


def tracked(*suffixes: str) -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in names if name.endswith(suffixes) and name != "CHANGELOG.md"]


def python_prose(text: str) -> list[str]:
    """The comments and docstrings of a Python file, as lines."""
    lines = [
        token.string for token in tokenize.generate_tokens(io.StringIO(text).readline) if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                lines += docstring.splitlines()
    return lines


def named_paths(lines: list[str]) -> set[str]:
    found = set()
    for line in lines:
        if OTHER_REPOSITORY.search(line):
            continue
        for match in PATH.finditer(line):
            path = match.group(1).rstrip(".")
            # The whole word the path is part of (to the next space, quote or bracket): a placeholder in it
            # (stacks/Pulumi.<stack>.yaml) makes it a pattern, not a path.
            word = re.match(r"[^\s`'\"()\[\]]*", line[match.start() :]).group(0)
            if path in UNITS or path in NOT_OURS or any(mark in word for mark in "<>{}*$&"):
                continue
            found.add(path)
    return found


def missing_in(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = python_prose(text) if path.suffix == ".py" else text.splitlines()
    return sorted(p for p in named_paths(lines) if not (ROOT / p).exists())


@pytest.mark.parametrize("path", tracked(".py", ".md"), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_named_in_prose_exists(path):
    assert missing_in(path) == [], f"{path.relative_to(ROOT)} names paths that do not exist"


def test_the_check_finds_a_moved_file(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""See tests/test_cost.py for the rule."""\n# and jobs/checkpoint.py\nx = "tests/made_up.py"\n',
        encoding="utf-8",
    )
    assert missing_in(probe) == ["jobs/checkpoint.py", "tests/test_cost.py"]
