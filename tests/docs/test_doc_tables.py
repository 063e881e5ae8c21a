"""The hand-written tables of the docs name exactly what the code has: the stack outputs (from what
`synth` exports for every stack), the preflight checks, the jobs, the workflows and the layout. A new
output, check, job, workflow, module or script without its line in the docs fails here."""

from __future__ import annotations

import ast
import re
import subprocess

from docs_support import ROOT, doc_files, page, section, table_rows
from synth_support import STACKS


def names_in_first_column(rows: list[list[str]]) -> list[str]:
    return [re.fullmatch(r"`([^`]+)`", row[0]).group(1) for row in rows if re.fullmatch(r"`([^`]+)`", row[0])]


def test_the_outputs_table_is_what_every_stack_exports(synth_stack):
    rows = table_rows(section(page("runs.md"), "Stack outputs"))
    documented = {name: {t.strip() for t in row[1].split(",")} for name, row in zip(names_in_first_column(rows), rows)}
    exported: dict[str, set[str]] = {}
    for stack in STACKS:
        rendered = synth_stack(stack)
        target = "existing" if not rendered.of_type("aws:ec2/vpc:Vpc") else "eks"
        for name in rendered.outputs:
            exported.setdefault(name, set()).add(target)
    assert set(documented) == set(exported), (
        f"docs/runs.md 'Stack outputs': missing {sorted(set(exported) - set(documented))}, "
        f"no longer exported {sorted(set(documented) - set(exported))}"
    )
    for name, targets in exported.items():
        assert documented[name] == targets, f"docs/runs.md: `{name}` is exported by targets {sorted(targets)}"


def test_the_preflight_checks_table_names_every_check_in_order():
    from infra.cli.preflight import CHECK_IDS

    rows = table_rows(section(page("commands/preflight.md"), "The checks"))
    assert names_in_first_column(rows) == list(CHECK_IDS)


def test_the_jobs_table_names_every_job():
    """A job is a module of jobs/ (of any of its packages) with a main(): what a pod (or a person) runs
    with `python -m`."""
    jobs = sorted(
        p.stem
        for p in (ROOT / "jobs").rglob("*.py")
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body)
    )
    rows = table_rows(page("commands/jobs.md").split("\n\n- **prepare**")[0])
    assert sorted(row[0] for row in rows) == jobs


NUMBER_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def test_every_workflow_has_its_section_in_the_ci_page():
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    text = page("ci.md")
    for path in workflows:
        assert f"\n### {path.name}\n" in text, f"docs/ci.md has no section '### {path.name}'"


def test_every_count_of_workflows_in_the_docs_is_right():
    """The old README said "three workflows" after the fourth had landed."""
    count = NUMBER_WORDS[len(list((ROOT / ".github" / "workflows").glob("*.yml")))]
    said = [
        (path.name, m.group(1).lower())
        for path in doc_files()
        for m in re.finditer(
            rf"\b({'|'.join(NUMBER_WORDS)}) (?:GitHub Actions )?workflows\b", path.read_text(), re.IGNORECASE
        )
    ]
    assert said, "no page says how many workflows there are"
    wrong = [(where, word) for where, word in said if word != count]
    assert not wrong, f"there are {count} workflows; the docs say {wrong}"


def layout() -> str:
    text = section(page("development.md"), "Layout")
    return re.search(r"```\n(.*?)```", text, re.DOTALL).group(1)


def test_the_layout_names_every_top_level_folder_and_file():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert tracked, "git ls-files listed nothing"
    top = {path.split("/")[0] + ("/" if "/" in path else "") for path in tracked}
    top -= {".gitignore", ".dockerignore", ".github/"}  # tool settings, and .github/workflows/ is named below
    text = layout()
    missing = sorted(entry for entry in top if not re.search(rf"(^|\s){re.escape(entry)}", text, re.MULTILINE))
    assert not missing, f"docs/development.md Layout does not name {missing}"
    assert ".github/workflows/" in text


def test_the_layout_names_every_package_job_module_and_script():
    text = layout()
    packages = [p.name for p in (ROOT / "infra").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    jobs = [p.stem for p in (ROOT / "jobs").glob("*.py") if p.stem != "__init__"]
    scripts = [p.name for p in (ROOT / "scripts").iterdir() if p.is_file()]
    missing = [f"infra/{name}/" for name in packages if f"  {name}/ " not in text]
    missing += [f"jobs/{name}.py" for name in jobs if not re.search(rf"\b{name}\.py\b", text)]
    missing += [f"scripts/{name}" for name in scripts if not re.search(rf"(?<![\w/]){re.escape(name)}\b", text)]
    assert not missing, f"docs/development.md Layout does not name {missing}"
