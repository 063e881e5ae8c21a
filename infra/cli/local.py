"""`elastic-training local`: the whole pipeline on this machine, on CPU, with no cloud.

prepare -> train (2 local workers, torchrun) -> evaluate: the same jobs/ code the pods run.
  elastic-training local             generated data in CIFAR-10's format (works offline)
  elastic-training local --cifar10   the real CIFAR-10 (downloads 170 MB, checks its MD5)
Each call is a new run, runs/<data>/run-<n>/ (model.pt, metrics.json); `--run-id run-<n>` goes back
to one: it resumes an unfinished run and only re-evaluates a finished one (jobs.training.train trains nothing
in a run directory that holds model.pt).

Exit status: 0 done; the failing step's own status otherwise; 2 usage.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from infra.cli.args import PROJECT_ROOT, OneLineParser, UsageError


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cifar10", action="store_true", default=False,
                        help="train on the real CIFAR-10, downloaded once (default: off, generated data)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs to train (default: 3 on generated data, 10 on CIFAR-10)")
    parser.add_argument("--run-id", default=None,
                        help="the run to go back to, e.g. run-1 (default: a new run, the next free run-<n>)")
    return parser


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def data_name(cifar10: bool) -> str:
    return "cifar10" if cifar10 else "synthetic"


def next_run_id(runs: Path) -> str:
    """run-<n>, one past the highest run-<n> in runs/<data>/."""
    taken = [int(match[1]) for path in (runs.iterdir() if runs.is_dir() else [])
             for match in [re.fullmatch(r"run-([0-9]+)", path.name)] if match]
    return f"run-{max(taken, default=0) + 1}"


def steps(cifar10: bool, epochs: int | None, python: str = sys.executable, run_id: str = "run-1") -> list[list[str]]:
    name = data_name(cifar10)
    source, default_epochs, batch = ([], 10, 128) if cifar10 else (["--synthetic", "100"], 3, 50)
    data, run = f"data/{name}/cifar-10-batches-py", f"runs/{name}/{run_id}"
    return [
        [python, "-m", "jobs.data.prepare", "--dest", f"data/{name}", *source],
        # torchrun is torch.distributed.run's console script; the module form needs no PATH.
        [python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2",
         "-m", "jobs.training.train", "--data", data, "--run-dir", run, "--epochs", str(epochs or default_epochs),
         "--batch-size", str(batch)],
        [python, "-m", "jobs.results.evaluate", "--data", data, "--model", f"{run}/model.pt", "--metrics-out", f"{run}/metrics.json"],
    ]


def main(argv: list[str] | None = None, root: Path = PROJECT_ROOT) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(f"local: {error}", file=sys.stderr)
        return 2
    if args.epochs is not None and args.epochs < 1:
        print(f"local: --epochs {args.epochs} is invalid: must be 1 or more", file=sys.stderr)
        return 2
    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        print(f"local: --run-id {args.run_id!r} is invalid: letters, digits, '.', '_' and '-' only", file=sys.stderr)
        return 2
    run_id = args.run_id or next_run_id(root / "runs" / data_name(args.cifar10))
    print(f"local: run {run_id} in runs/{data_name(args.cifar10)}/{run_id}", file=sys.stderr)
    for command in steps(args.cifar10, args.epochs, run_id=run_id):
        status = subprocess.run(command, cwd=root, check=False).returncode
        if status != 0:
            return status
    return 0
