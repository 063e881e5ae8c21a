"""Reading the README and the docs site (docs/), shared by the tests that check them against the code."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def doc_files() -> list[Path]:
    """Every Markdown file a user reads: the README and every page of the site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def page(name: str) -> str:
    """The text of docs/<name> (e.g. "ci.md", "commands/jobs.md")."""
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, title: str, level: int = 2) -> str:
    """The text under a `## title` heading (of `level` #s), up to the next heading of that level or higher."""
    hashes = "#" * level
    match = re.search(rf"^{hashes} {re.escape(title)}\n(.*?)(?=^#{{1,{level}}} |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"no section '{hashes} {title}'"
    return match.group(1)


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables in `text`, as lists of stripped cells (header and rule skipped)."""
    rows, previous = [], ""
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip()):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if previous.startswith("|"):
                rows.append(cells)
        previous = line if line.startswith("|") else ""
    return [row for row in rows if row]


def docs_script() -> ModuleType:
    """scripts/docs.py, the generator of the docs' generated blocks (a script, not a package)."""
    if "docs_script" not in sys.modules:
        spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["docs_script"] = module  # dataclasses look the module up while it loads
        spec.loader.exec_module(module)
    return sys.modules["docs_script"]
