"""The generated parts of the docs are what the code makes today (scripts/docs.py), and the check
itself notices a stale block, a missing block and a stale or missing stack row."""

from __future__ import annotations

import shutil

import pytest

from docs_support import DOCS, ROOT, docs_script

BLOCKS = docs_script().blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.name)
def test_generated_block_is_current(block):
    text = (ROOT / block.file).read_text()
    found = docs_script().current(text, block.name)
    assert found is not None, (
        f"{block.file} has no block {block.name}: run `.venv/bin/python scripts/docs.py` after adding its markers"
    )
    assert found == block.render(), f"{block.file}: block {block.name} is stale: run `.venv/bin/python scripts/docs.py`"


def test_every_command_and_job_has_its_block():
    """Derived from the code, not listed by hand: a new subcommand or job needs its page."""
    from infra.cli.main import COMMANDS

    names = {block.name for block in BLOCKS}
    assert {f"command-{name}" for name in COMMANDS} <= names
    jobs = {path.stem for path in (ROOT / "jobs").rglob("*.py") if "def build_parser" in path.read_text()}
    assert jobs and {f"job-{name}" for name in jobs} <= names


@pytest.fixture
def copy(tmp_path):
    """A copy of what scripts/docs.py reads and writes, to break on purpose."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return tmp_path


def test_the_check_finds_a_stale_block_and_the_writer_fixes_it(copy):
    script = docs_script()
    path = copy / "docs" / "configuration.md"
    path.write_text(
        path.read_text().replace("| `elastic-training:nodeMaxCount` |", "| `elastic-training:nodeMaxKount` |")
    )
    assert script.stale(copy) == ["docs/configuration.md: block `config-table` is stale (run scripts/docs.py)"]
    script.write(copy)
    assert script.stale(copy) == [] and path.read_text() == (DOCS / "configuration.md").read_text()


def test_the_check_finds_a_missing_block(copy):
    path = copy / "docs" / "commands" / "local.md"
    path.write_text(path.read_text().replace("<!-- end: command-local -->", ""))
    (problem,) = docs_script().stale(copy)
    assert problem.startswith("docs/commands/local.md: no block `command-local`")


def test_the_check_finds_a_stale_cost_cell_and_a_stack_without_a_row(copy):
    script = docs_script()
    readme = copy / "README.md"
    rows = [line for line in readme.read_text().splitlines() if line.startswith("| `dev` |")]
    assert len(rows) == 1
    readme.write_text(readme.read_text().replace(rows[0], rows[0].rsplit(" | ", 2)[0] + " | $9.99 | $9.99 |"))
    assert script.stale(copy) == ["README.md: the Stacks table's cost cells are stale (run scripts/docs.py)"]
    readme.write_text(readme.read_text().replace(rows[0].rsplit(" | ", 2)[0] + " | $9.99 | $9.99 |\n", ""))
    assert script.stale(copy) == ["README.md: no row for stack `dev` in its Stacks table"]
