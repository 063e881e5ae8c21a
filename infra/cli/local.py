"""`elastic-training local`: the whole pipeline on this machine, on CPU, with no cloud.

prepare -> train (2 local workers, torchrun) -> evaluate: the same jobs/ code the pods run.
  elastic-training local             generated data in CIFAR-10's format (works offline)
  elastic-training local --cifar10   the real CIFAR-10 (downloads 170 MB, checks its MD5)
Results: runs/<data>/model.pt and runs/<data>/metrics.json.

Exit status: 0 done; the failing step's own status otherwise; 2 usage.
"""

from __future__ import annotations

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
    return parser


def steps(cifar10: bool, epochs: int | None, python: str = sys.executable) -> list[list[str]]:
    name, source, default_epochs, batch = (("cifar10", [], 10, 128) if cifar10 else
                                           ("synthetic", ["--synthetic", "100"], 3, 50))
    data, run = f"data/{name}/cifar-10-batches-py", f"runs/{name}"
    return [
        [python, "-m", "jobs.prepare", "--dest", f"data/{name}", *source],
        # torchrun is torch.distributed.run's console script; the module form needs no PATH.
        [python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2",
         "-m", "jobs.train", "--data", data, "--run-dir", run, "--epochs", str(epochs or default_epochs),
         "--batch-size", str(batch)],
        [python, "-m", "jobs.evaluate", "--data", data, "--model", f"{run}/model.pt", "--metrics-out", f"{run}/metrics.json"],
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
    for command in steps(args.cifar10, args.epochs):
        status = subprocess.run(command, cwd=root, check=False).returncode
        if status != 0:
            return status
    return 0
