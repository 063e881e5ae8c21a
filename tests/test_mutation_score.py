"""scripts/mutation_score.py, the scorer of scripts/mutation.sh: its exit-code classes are mutmut's
own (mutmut 3.8.1 mutmut/stats.py status_by_exit_code, read from the installed package), its
arithmetic is checked on a mutants folder written here, and every accepted equivalent mutant in
pyproject.toml belongs to a target and is listed, with its reason, in docs/development.md."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import tomllib
from pathlib import Path

import pytest
from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parent.parent


def load_scorer():
    spec = importlib.util.spec_from_file_location("mutation_score", ROOT / "scripts" / "mutation_score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scorer = load_scorer()


def test_the_exit_code_classes_are_mutmuts_own():
    caught_statuses = {"killed", "timeout", "caught by type check"}
    assert scorer.CAUGHT == {code for code, status in status_by_exit_code.items() if status in caught_statuses}
    assert scorer.SURVIVED == {code for code, status in status_by_exit_code.items() if status == "survived"}


PYPROJECT = """
[tool.mutation.targets]
alpha = { file = "pkg/alpha.py", mutants = ["pkg.alpha.*"] }
beta = { file = "pkg/beta/", mutants = ["pkg.beta.x_one__mutmut_*"] }

[tool.mutation.equivalent]
"pkg.alpha.x_f__mutmut_5" = "the same program"
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    meta = tmp_path / "mutants" / "pkg" / "alpha.py.meta"
    meta.parent.mkdir(parents=True)
    # alpha: 1 killed, 1 timeout, 1 survived, 1 not reached (33), 1 equivalent survivor -> 2 of 4 = 50 %
    meta.write_text(
        json.dumps(
            {
                "exit_code_by_key": {
                    "pkg.alpha.x_f__mutmut_1": 1,
                    "pkg.alpha.x_f__mutmut_2": 36,
                    "pkg.alpha.x_f__mutmut_3": 0,
                    "pkg.alpha.x_f__mutmut_4": 33,
                    "pkg.alpha.x_f__mutmut_5": 0,
                }
            }
        )
    )
    beta = tmp_path / "mutants" / "pkg" / "beta" / "one.py.meta"
    beta.parent.mkdir(parents=True)
    # beta counts only x_one: 4 of 5 caught = 80 %, exactly the minimum
    beta.write_text(
        json.dumps(
            {
                "exit_code_by_key": {
                    **{f"pkg.beta.x_one__mutmut_{i}": code for i, code in enumerate([1, 3, 24, 37, 0], start=1)},
                    "pkg.beta.x_two__mutmut_1": 0,
                }
            }
        )
    )
    monkeypatch.setattr(scorer, "ROOT", tmp_path)
    return tmp_path


def test_a_score_counts_caught_over_all_but_the_equivalent_and_fails_below_the_minimum(project, capsys):
    assert scorer.score(["beta"], 80.0) == 0
    assert scorer.score(["alpha"], 80.0) == 1
    assert scorer.score([], 80.0) == 1  # every target: the worst one decides
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0] == "beta             80.0 %  4/5 caught, 1 survived, 0 not reached by the selected tests, 0 equivalent"
    )
    assert lines[1] == "    survived pkg.beta.x_one__mutmut_5   (mutmut show pkg.beta.x_one__mutmut_5)"
    assert (
        lines[2] == "alpha            50.0 %  2/4 caught, 1 survived, 1 not reached by the selected tests, 1 equivalent"
    )
    assert lines[3] == "    survived pkg.alpha.x_f__mutmut_3   (mutmut show pkg.alpha.x_f__mutmut_3)"
    assert scorer.score(["alpha"], 50.0) == 0


def test_globs_are_the_targets_own_and_an_unknown_target_is_one_line(project):
    assert scorer.targets(["beta"]) == {"beta": {"file": "pkg/beta/", "mutants": ["pkg.beta.x_one__mutmut_*"]}}
    with pytest.raises(SystemExit) as refused:
        scorer.targets(["gamma"])
    assert str(refused.value) == "mutation: unknown target 'gamma'; known: alpha, beta"


# --- the real configuration ----------------------------------------------------------------------------


def real_settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutation"]


def test_every_equivalent_mutant_belongs_to_a_target_and_has_a_one_line_reason():
    settings = real_settings()
    globs = [g for target in settings["targets"].values() for g in target["mutants"]]
    for name, reason in settings["equivalent"].items():
        assert any(fnmatch.fnmatchcase(name, g) for g in globs), f"{name} is in no target"
        assert reason.strip() and "\n" not in reason, name


def test_the_docs_list_every_equivalent_mutant_with_its_reason():
    text = (ROOT / "docs" / "development.md").read_text()
    listed = [line for line in text.splitlines() if line.startswith("- `") and "__mutmut_" in line]
    assert listed == [f"- `{name}`: {reason}" for name, reason in real_settings()["equivalent"].items()]


def test_every_target_file_exists_and_is_one_mutmut_mutates():
    settings = real_settings()
    mutated = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    for name, target in settings["targets"].items():
        assert (ROOT / target["file"]).exists(), name
        assert any(
            fnmatch.fnmatchcase(target["file"], g)
            or target["file"].startswith(g.rstrip("*"))
            or g.startswith(target["file"])
            for g in mutated
        ), name
