"""What the platform and any training code share is written once, in elastic_training (issue 38): the
exit-code table, the run directory's names and environment variables, the ElasticJob's names and
labels. These tests read every module of the project's own packages and fail on a second copy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from elastic_training import elasticjob, exit_codes, run_directory

REPO = Path(__file__).resolve().parents[1]
# The project's code, the contract excepted. examples/ is users' code: a plain torchrun script may name
# its files as it likes. tests/ may spell the values out to check them.
PACKAGES = ["jobs", "controller", "infra", "benchmarks", "scripts"]
NAMES = {
    run_directory.CHECKPOINT,
    run_directory.PREVIOUS_CHECKPOINT,
    run_directory.REJECTED_CHECKPOINT,
    run_directory.MODEL,
    run_directory.HISTORY,
    run_directory.METRICS,
    run_directory.RUN_DIR_ENV,
    run_directory.DATA_DIR_ENV,
    elasticjob.GROUP,
    elasticjob.WORKER_CONTAINER,
    elasticjob.RUN_LABEL,
    elasticjob.JOB_LABEL,
    elasticjob.ELASTICJOB_LABEL,
    elasticjob.API_VERSION,
}
CODES = {
    exit_codes.CANNOT_EXECUTE,
    exit_codes.COMMAND_NOT_FOUND,
    exit_codes.INTERRUPTED,
    exit_codes.STORE_UNAVAILABLE,
    exit_codes.TERMINATED,
}


def sources() -> list[Path]:
    files = [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]
    return files + [REPO / "__main__.py"]


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose may name the files)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def copies(path: Path, names: set[str], codes: set[int]) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    prose = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in prose:
            continue
        where = f"{path.relative_to(REPO)}:{node.lineno}"
        if isinstance(node.value, str):
            text = node.value
            # The value itself, or the end of a path ("/model.pt", f"{run}/model.pt").
            if any(
                text == name or text.endswith("/" + name) or text.startswith(name + "/") and name == elasticjob.GROUP
                for name in names
            ):
                found.append(f"{where}: {text!r}")
        elif type(node.value) is int and node.value in codes:
            found.append(f"{where}: {node.value}")
    for node in ast.walk(tree):  # an exit code computed as the contract computes it: 128 + signal.X
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add)
            and isinstance(node.left, ast.Constant)
            and node.left.value == 128
            and isinstance(node.right, ast.Attribute)
            and isinstance(node.right.value, ast.Name)
            and node.right.value.id == "signal"
        ):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: 128 + signal.{node.right.attr}")
    return found


def test_no_module_outside_the_contract_writes_its_names_or_exit_codes_again():
    found = [copy for path in sources() for copy in copies(path, NAMES, CODES)]
    assert found == [], "written again outside elastic_training (import it from there):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('HISTORY_NAME = "history.jsonl"\n', 1),
        ('args = [f"{run}/model.pt"]\n', 1),
        ('SIGTERM_EXIT = 143\n', 1),
        ('import signal\nEXIT = 128 + signal.SIGTERM\n', 1),
        ('"""Writes model.pt."""\n', 0),  # prose
        ('from elastic_training import run_directory\nNAME = run_directory.MODEL\n', 0),
    ],
)
def test_the_check_finds_a_copy(tmp_path, text, expected):
    """The scan itself: a copy in any of its forms is found, prose and imports are not."""
    module = REPO / "tests" / f".contract-probe-{tmp_path.name}.py"
    module.write_text(text)
    try:
        assert len(copies(module, NAMES, CODES)) == expected
    finally:
        module.unlink()


def test_the_contract_is_importable_without_torch_or_pulumi():
    """The controller, `infra/` (Pulumi's Python, no torch) and jobs/ all import it."""
    import subprocess
    import sys

    code = (
        "import sys; import elastic_training.exit_codes, elastic_training.run_directory, "
        "elastic_training.elasticjob, elastic_training.history; "
        "assert 'torch' not in sys.modules and 'pulumi' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
