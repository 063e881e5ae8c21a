"""Helper of scripts/mutation.sh: the targets in pyproject's [tool.mutation], and their scores read
from what mutmut wrote (mutants/<file>.meta: exit_code_by_key, mutant name -> pytest's exit code).

  python scripts/mutation_score.py globs TARGET...      mutant-name globs to pass to `mutmut run`
  python scripts/mutation_score.py changed BASE         targets whose file differs from git BASE
  python scripts/mutation_score.py score TARGET...      one line per target; exit 1 below --min
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# mutmut/stats.py status_by_exit_code (mutmut 3.8.1): 1 and 3 killed, 36/24/-24/152/255 timeout
# (an endless loop is a caught mutant), 37 caught by the type checker; 0 survived, 33/5 no tests.
CAUGHT = {1, 3, 36, 24, -24, 152, 255, 37}
SURVIVED = {0}


def settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutation"]


def targets(names: list[str]) -> dict[str, dict]:
    known = settings()["targets"]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"mutation: unknown target {unknown[0]!r}; known: {', '.join(known)}")
    return {n: known[n] for n in names or known}


def mutant_results() -> dict[str, int | None]:
    results: dict[str, int | None] = {}
    for meta in (ROOT / "mutants").rglob("*.py.meta"):
        results.update(json.loads(meta.read_text())["exit_code_by_key"])
    return results


def score(names: list[str], minimum: float) -> int:
    results, equivalent = mutant_results(), settings().get("equivalent", {})
    worst = 100.0
    for name, target in targets(names).items():
        mine = {k: v for k, v in results.items() if any(fnmatch.fnmatchcase(k, g) for g in target["mutants"])}
        counted = {k: v for k, v in mine.items() if k not in equivalent}
        caught = sum(v in CAUGHT for v in counted.values())
        survived = sorted(k for k, v in counted.items() if v in SURVIVED)
        untested = sorted(k for k, v in counted.items() if v not in CAUGHT and v not in SURVIVED)
        percent = 100.0 * caught / len(counted) if counted else 0.0
        worst = min(worst, percent)
        print(
            f"{name:15} {percent:5.1f} %  {caught}/{len(counted)} caught, {len(survived)} survived, "
            f"{len(untested)} not reached by the selected tests, {len(mine) - len(counted)} equivalent"
        )
        for k in survived:
            print(f"    survived {k}   (mutmut show {k})")
    return 0 if worst >= minimum else 1


def changed(base: str) -> None:
    files = subprocess.run(
        ["git", "diff", "--name-only", base, "--"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    print(" ".join(n for n, t in targets([]).items() if any(f.startswith(t["file"]) for f in files)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["globs", "changed", "score"])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--min", type=float, default=80.0)
    args = parser.parse_args()
    if args.command == "globs":
        print("\n".join(g for t in targets(args.names).values() for g in t["mutants"]))
    elif args.command == "changed":
        changed(args.names[0] if args.names else "main")
    else:
        return score(args.names, args.min)
    return 0


if __name__ == "__main__":
    sys.exit(main())
