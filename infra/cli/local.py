"""`elastic-training local`: the whole pipeline on this machine, on CPU, with no cloud.

prepare -> train (2 local workers, torchrun) -> evaluate: the same jobs/ code the pods run.
  elastic-training local             generated data in CIFAR-10's format (works offline)
  elastic-training local --cifar10   the real CIFAR-10 (downloads 170 MB, checks its MD5)
Each call is a new run, runs/<data>/run-<n>/ (model.pt, metrics.json); `--run-id run-<n>` goes back
to one: it resumes an unfinished run and only re-evaluates a finished one (jobs.training.train trains nothing
in a run directory that holds model.pt).

Any torchrun script instead (infra/cli/local_script.py: under our agent and store, as the pods run it):
  elastic-training local --script PATH [--nproc N] [-- SCRIPT_ARGS...]
  elastic-training local --module NAME [--nproc N] [-- SCRIPT_ARGS...]

Exit status: 0 done; the failing step's own status otherwise; 2 usage.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from elastic_training import run_directory
from infra.cli import local_script
from infra.cli.args import PROJECT_ROOT, OneLineParser, UsageError


MAX_NPROC = 16  # processes on one machine; far above what a laptop trains well with
DEFAULT_NPROC = 2


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cifar10", action="store_true", default=False,
                        help="train on the real CIFAR-10, downloaded once (default: off, generated data)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs to train (default: 3 on generated data, 10 on CIFAR-10)")
    parser.add_argument("--run-id", default=None,
                        help="the run to go back to, e.g. run-1 (default: a new run, the next free run-<n>)")
    own = parser.add_mutually_exclusive_group()
    own.add_argument("--script", default=None, metavar="PATH",
                     help="run this torchrun script instead of the CIFAR-10 pipeline; its arguments follow `--` "
                          "(default: none)")
    own.add_argument("--module", default=None, metavar="NAME",
                     help="run `python -m NAME` as the torchrun script instead (default: none)")
    parser.add_argument("--nproc", type=int, default=None,
                        help=f"workers for --script/--module, 1..{MAX_NPROC}, one agent each (default: {DEFAULT_NPROC})")
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
        [python, "-m", "jobs.results.evaluate", "--data", data, "--model", f"{run}/{run_directory.MODEL}",
         "--metrics-out", f"{run}/{run_directory.METRICS}"],
    ]


MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def main(argv: list[str] | None = None, root: Path = PROJECT_ROOT) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` belongs to the script.
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(f"local: {error}", file=sys.stderr)
        return 2
    if args.script or args.module:
        return _own_script(args, script_args, root)
    if script_args or args.nproc is not None:
        print("local: --nproc and script arguments after `--` need --script or --module", file=sys.stderr)
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


def _own_script(args, script_args: list[str], root: Path) -> int:
    if args.cifar10 or args.epochs is not None:
        print("local: --cifar10 and --epochs are the CIFAR-10 pipeline's; pass your script's own options after `--`",
              file=sys.stderr)
        return 2
    nproc = DEFAULT_NPROC if args.nproc is None else args.nproc
    if not 1 <= nproc <= MAX_NPROC:
        print(f"local: --nproc {args.nproc} is invalid: must be from 1 to {MAX_NPROC}", file=sys.stderr)
        return 2
    if args.script and not Path(args.script).is_file():
        print(f"local: --script {args.script}: no such file", file=sys.stderr)
        return 2
    if args.module and not MODULE_NAME.fullmatch(args.module):
        print(f"local: --module {args.module!r} is invalid: a Python module name such as mytrain or pkg.train",
              file=sys.stderr)
        return 2
    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        print(f"local: --run-id {args.run_id!r} is invalid: letters, digits, '.', '_' and '-' only", file=sys.stderr)
        return 2
    name = local_script.target_name(args.script, args.module)
    target = [args.script] if args.script else ["-m", args.module]
    run_id = args.run_id or next_run_id(root / "runs" / name)
    return local_script.run([*target, *script_args], name, nproc, run_id, root)
