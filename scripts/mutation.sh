#!/usr/bin/env bash
# Mutation testing of the modules where a wrong line is a wrong cluster or a wrong model
# (targets: pyproject.toml [tool.mutation]; mutmut's settings: [tool.mutmut]). Not part of
# scripts/test.sh: it takes minutes per target. docs/development.md says when to run it.
#
#   scripts/mutation.sh                    every target, one after the other
#   scripts/mutation.sh config checkpoint  the named targets
#   scripts/mutation.sh --changed [BASE]   the targets whose files differ from BASE (default: main)
#
# MUTMUT_CHILDREN (default 1) mutants run at once; MUTMUT (default .venv/bin/mutmut) is the command.
# Prints each target's score and its surviving mutants; exits 1 if one is below 80 %.
set -euo pipefail
cd "$(dirname "$0")/.."

mutmut=${MUTMUT:-.venv/bin/mutmut}
python=.venv/bin/python
[ -x "$mutmut" ] || [ -n "${MUTMUT:-}" ] \
  || { echo "mutation: $mutmut not found: run scripts/setup.sh (the dev extra pins mutmut)" >&2; exit 2; }

if [ "${1:-}" = "--changed" ]; then
  read -r -a targets <<< "$("$python" scripts/mutation_score.py changed "${2:-main}")"
  [ "${#targets[@]}" -gt 0 ] || { echo "mutation: no target file changed since ${2:-main}"; exit 0; }
else
  targets=("$@")
  [ "${#targets[@]}" -gt 0 ] || read -r -a targets <<< "$("$python" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["mutation"]["targets"]))')"
fi

# A fresh copy each time: mutmut caches results and test timings in mutants/ and would keep
# verdicts from before a test changed.
rm -rf mutants && mkdir mutants
for target in "${targets[@]}"; do
  mapfile -t globs < <("$python" scripts/mutation_score.py globs "$target")
  start=$SECONDS
  "$mutmut" run --max-children "${MUTMUT_CHILDREN:-1}" "${globs[@]}" > "mutants/$target.log" 2>&1 \
    || { tail -n 30 "mutants/$target.log" >&2; echo "mutation: mutmut failed on $target (log: mutants/$target.log)" >&2; exit 2; }
  echo "mutation: $target took $((SECONDS - start)) s"
done
"$python" scripts/mutation_score.py score "${targets[@]}"
