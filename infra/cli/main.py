"""`elastic-training`: the one command for everything a user runs.

    elastic-training COMMAND [ARGS ...]      elastic-training COMMAND --help

Each command is a module of infra/cli/ with its own `main(argv) -> exit status`.
"""

from __future__ import annotations

import importlib
import signal
import sys

from elastic_training import exit_codes


class Command:
    """A command's entry point, `module:function`, imported only when it runs: the imports (Pulumi,
    boto3) take seconds, and a Ctrl-C then must land inside main()'s handler, not in an import."""

    def __init__(self, target: str):
        self.__module__, _, self.function = target.partition(":")

    def __call__(self, argv: list[str]) -> int:
        return getattr(importlib.import_module(self.__module__), self.function)(argv)


# name -> (entry point, one line for the overview, exit statuses)
COMMANDS: dict[str, tuple[Command, str, str]] = {
    "synth": (
        Command("infra.cli.synth:main"),
        "render a stack offline under Pulumi's mocks: manifests, resources, graph, cost",
        "0 written, 2 bad config, usage or --out",
    ),
    "preflight": (
        Command("infra.cli.preflight.command:main"),
        "check the AWS account, zones, quotas, versions and local tools for a stack",
        "0 every check ran and nothing failed, 1 a check failed, 2 bad config, usage or AWS profile, 3 some checks could not run",
    ),
    "cost": (
        Command("infra.cli.cost_command:main"),
        "what a stack costs between runs, during one and at most per run, item by item",
        "0 printed, 2 bad config or usage",
    ),
    "compare": (
        Command("infra.cli.compare:main"),
        "two stacks' costs side by side, per hour, per day and per run, and the difference",
        "0 printed, 2 bad config or usage",
    ),
    "up": (
        Command("infra.cli.deploy:up"),
        "synth, preflight, then `pulumi up` (preview, then asks before changing anything)",
        "0 deployed, 1 preflight failed or could not check, or Pulumi failed, 2 bad stack, config or usage",
    ),
    "destroy": (
        Command("infra.cli.deploy:destroy"),
        "`pulumi destroy` of a stack (preview, then asks)",
        "0 removed, 1 Pulumi failed, 2 bad stack or usage",
    ),
    "status": (
        Command("infra.cli.status:main"),
        "where the stack's training run stands: state, workers, last failure, progress",
        "0 printed, 1 the cluster cannot be read or has no such run, 2 bad config or usage",
    ),
    "local": (
        Command("infra.cli.local:main"),
        "the whole pipeline on this machine on CPU: prepare, train (torchrun), evaluate",
        "0 done, 2 usage or the run in use, 3 the disk full or read-only, 130 interrupted, a failing step's status",
    ),
    "config-table": (
        Command("infra.cli.config_docs:main"),
        "print the configuration table of the docs, made from the key table",
        "0 printed",
    ),
}


def overview() -> str:
    width = max(map(len, COMMANDS))
    lines = [
        "usage: elastic-training COMMAND [ARGS ...]   (elastic-training COMMAND --help for its options)",
        "",
        "Distributed PyTorch training on Amazon EKS as Pulumi stacks.",
        "",
        "commands:",
    ]
    lines += [f"  {name:{width}}  {summary}" for name, (_, summary, _) in COMMANDS.items()]
    lines += ["", "exit status:"] + [f"  {name:{width}}  {codes}" for name, (_, _, codes) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(overview())
        return 0 if args else 2
    entry = COMMANDS.get(args[0])
    if entry is None:
        print(f"elastic-training: unknown command '{args[0]}' (commands: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    try:
        return entry[0](args[1:])
    except KeyboardInterrupt:
        # Ctrl-C: one line, not the traceback of wherever Python was; 130 = 128 + SIGINT, as a shell reports it.
        # `local` handles it itself (it names the command that resumes the run).
        print(f"elastic-training {args[0]}: interrupted (Ctrl-C)", file=sys.stderr)
        return exit_codes.INTERRUPTED


def run() -> None:
    """The console script `elastic-training` (pyproject.toml [project.scripts])."""
    code = main()
    # The work is done: a Ctrl-C while the interpreter tears down (Pulumi's gRPC threads take seconds to
    # join after synth) would only kill the process and lose this exit status.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)
