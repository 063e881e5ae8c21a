"""The layout is the architecture: a folder's name says what its files are, arrows run one way, files stay small.

    cli -> program -> components -> specs -> config -> aws -> versions
(a module may import its own layer or a lower one, never a higher one); jobs/ never imports infra/ or pulumi;
controller/ imports none of infra/, jobs/, pulumi.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. program.py and the Pulumi entry point compose; versions.py is the pin file all layers read.
LAYERS = [
    "infra.versions",
    "infra.aws",
    "infra.config",
    "infra.specs",
    "infra.components",
    "infra.program",
    "infra.cli",
]
TOP_LEVEL = {"infra.__main__": "infra.program", "infra": "infra.versions"}
MAX_LINES = 400
# A module may pass the limit only with a reason, stated in its docstring with this phrase.
OVER_THE_LIMIT = "over 400 lines because"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    module = TOP_LEVEL.get(module, module)
    for index, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return index
    raise AssertionError(f"{module} belongs to no layer: put it in one of {', '.join(LAYERS)}")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, function-level ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from infra import versions` imports the module infra.versions
            found += [
                (node.lineno, f"{node.module}.{alias.name}" if node.module == "infra" else node.module)
                for alias in node.names
            ]
    return found


PRODUCT = sorted((ROOT / "infra").rglob("*.py"))


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down_only(path):
    own = layer_of(module_name(path))
    for line, module in imported_modules(path):
        if module.split(".")[0] != "infra":
            continue
        assert layer_of(module) <= own, (
            f"{path.relative_to(ROOT)}:{line} imports {module} ({LAYERS[layer_of(module)]}), a layer above "
            f"{LAYERS[own]}: arrows run cli -> program -> components -> specs -> config -> aws -> versions"
        )


@pytest.mark.parametrize("path", sorted((ROOT / "jobs").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_jobs_never_import_infra_or_pulumi(path):
    for line, module in imported_modules(path):
        assert module.split(".")[0] not in ("infra", "pulumi", "pulumi_aws", "pulumi_kubernetes"), (
            f"{path.relative_to(ROOT)}:{line} imports {module}: the training image carries jobs/ only"
        )


@pytest.mark.parametrize("path", sorted((ROOT / "controller").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_controller_never_imports_infra_jobs_or_pulumi(path):
    """controller/ runs in the training image beside jobs/, with the kubernetes client only."""
    for line, module in imported_modules(path):
        assert module.split(".")[0] not in ("infra", "jobs", "pulumi", "pulumi_aws", "pulumi_kubernetes", "torch"), (
            f"{path.relative_to(ROOT)}:{line} imports {module}: the controller needs only the kubernetes client"
        )


@pytest.mark.parametrize(
    "path",
    PRODUCT + sorted((ROOT / "jobs").rglob("*.py")) + sorted((ROOT / "controller").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_over_the_size_limit_without_a_reason(path):
    lines = len(path.read_text().splitlines())
    if lines > MAX_LINES:
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert OVER_THE_LIMIT in docstring, (
            f"{path.relative_to(ROOT)} has {lines} lines (limit {MAX_LINES}): split it along its seams, or say in its "
            f"docstring why not ('{OVER_THE_LIMIT} ...')"
        )


def test_every_folder_is_in_the_layout_and_says_what_it_holds():
    text = (ROOT / "docs" / "development.md").read_text()
    layout = text[text.index("## Layout") :]
    for package in sorted(p for p in (ROOT / "infra").iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        assert f"  {package.name}/ " in layout, (
            f"infra/{package.name}/ is missing from the Layout of docs/development.md"
        )
        assert ast.get_docstring(ast.parse((package / "__init__.py").read_text())), (
            f"infra/{package.name}/__init__.py must say in a docstring what every file in the folder is"
        )


def test_the_layer_rule_catches_an_upward_import(tmp_path):
    """The check itself: a specs module importing a component is refused."""
    bad = ROOT / "infra" / "specs" / "_upward_probe.py"
    assert layer_of("infra.specs._upward_probe") < layer_of("infra.components.completion")
    text = "from infra.components.completion import ElasticJobCompletion\nfrom infra import program\n"
    probe = tmp_path / "probe.py"
    probe.write_text(text)
    modules = [m for _, m in imported_modules(probe)]
    assert modules == ["infra.components.completion", "infra.program"]
    assert all(layer_of(m) > layer_of(module_name(bad)) for m in modules)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the two packages, by its dotted name."""
    return {
        module_name(path, root): path
        for package in ("infra", "jobs")
        for path in sorted((root / package).rglob("*.py"))
    }


def import_edges(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of `known` a file imports, function-level and TYPE_CHECKING imports included (a
    cycle hidden behind TYPE_CHECKING is still two modules that cannot be read one at a time).
    `from pkg import mod` is an edge to pkg.mod where that is a module, else to pkg; relative imports
    are resolved against the file's own package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            edges |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                edges.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {edge for edge in edges if edge in known and edge != name}


def import_cycles(files: dict[str, Path]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph = {name: sorted(import_edges(path, name, set(files))) for name, path in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_two_modules_import_each_other():
    """A module that imports one that imports it back (issue 30: preflight's checks.py and capacity.py)
    has no order in which it can be read, tested or moved alone: pass the small interface instead."""
    cycles = import_cycles(module_files())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(cycle) for cycle in cycles)


def test_the_cycle_check_finds_a_cycle_behind_type_checking(tmp_path):
    """The check itself, on two modules that import each other, one only for its type hints."""
    package = tmp_path / "infra" / "probe"
    package.mkdir(parents=True)
    (tmp_path / "infra" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from infra.probe import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n")
    (package / "c.py").write_text("from infra.probe.a import x\n")
    assert import_cycles(module_files(tmp_path)) == [["infra.probe.a", "infra.probe.b"]]
