"""`elastic-training up STACK` and `elastic-training destroy STACK`: the Pulumi CLI, with our checks first.

up: the config is checked offline (synth into .synth/STACK, seconds, no cloud call), then the account
(preflight: read-only AWS calls; a FAIL stops here, before anything is created), then the state
directory of the default file backend is created (the diy backend does not create it:
upstream-facts-2.md fact 6), then `pulumi stack select --create STACK` and `pulumi up --stack STACK`,
which shows the preview and asks before it changes anything.
destroy: `pulumi stack select STACK` and `pulumi destroy --stack STACK`, which also previews and asks.

up stops too when preflight could not run some checks (AWS did not answer), unless --accept-unchecked.

Exit status: 0 done; 1 preflight failed or could not check (without --accept-unchecked), or Pulumi's own non-zero status; 2 bad stack, config or usage,
or no `pulumi` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from infra.cli import synth
from infra.cli.args import PROJECT_ROOT, OneLineParser, UsageError, add_stack_argument
from infra.cli.preflight.command import UNCHECKED, main as preflight_main
from infra.config.stack_file import StackConfigError, stack_name

# Pulumi.yaml's backend (file://./.pulumi-state), used unless PULUMI_BACKEND_URL names another.
STATE_DIR = ".pulumi-state"

Runner = Callable[[list[str]], int]


def run_in(root: Path) -> Runner:
    return lambda command: subprocess.run(command, cwd=root, check=False).returncode


def build_parser(command: str) -> OneLineParser:
    what = {"up": "check, preview and deploy a stack", "destroy": "preview and remove everything a stack created"}
    parser = OneLineParser(prog=f"elastic-training {command}", description=what[command])
    add_stack_argument(parser)
    if command == "up":
        parser.add_argument(
            "--accept-unchecked",
            action="store_true",
            default=False,
            help="go on when preflight could not run some checks (AWS did not answer them) and nothing "
            "failed (default: off, stop)",
        )
    return parser


def _start(command: str, argv: list[str] | None, root: Path) -> tuple[str | None, int, bool]:
    """(stack, 0, accept unchecked) when the command may go on, else (None, exit status, False) after one line."""
    try:
        args = build_parser(command).parse_args(argv)
        stack = stack_name(args.stack, root / "stacks")
    except (UsageError, StackConfigError) as error:
        print(f"{command}: {error}", file=sys.stderr)
        return None, 2, False
    if shutil.which("pulumi") is None:
        print(
            f"{command}: the Pulumi CLI is not on PATH (install it: docs/getting-started.md, 'Prerequisites')",
            file=sys.stderr,
        )
        return None, 2, False
    return stack, 0, getattr(args, "accept_unchecked", False)


def up(
    argv: list[str] | None = None,
    *,
    root: Path = PROJECT_ROOT,
    preflight: Callable[[list[str]], int] = preflight_main,
    run: Runner | None = None,
) -> int:
    stack, status, accept_unchecked = _start("up", argv, root)
    if stack is None:
        return status
    run = run or run_in(root)
    # Config mistakes in seconds, before any cloud call.
    try:
        synth.synth(stack, root / ".synth" / stack, [], stacks_dir=root / "stacks")
    except synth.SynthError as error:
        print(f"up: {error}", file=sys.stderr)
        return 2
    checked = preflight([stack])
    if checked == UNCHECKED and accept_unchecked:
        print(
            f"up: preflight could not run every check for stack {stack}; going on (--accept-unchecked)", file=sys.stderr
        )
    elif checked == UNCHECKED:
        print(
            f"up: preflight could not run every check for stack {stack} (marked 'could not check' above), so "
            "nothing was created; rerun when AWS answers, or add --accept-unchecked to go on without them",
            file=sys.stderr,
        )
        return 1
    elif checked != 0:
        print(
            f"up: preflight failed for stack {stack}; fix the checks marked FAIL above (nothing was created)"
            if checked == 1
            else f"up: preflight could not read stack {stack} (see above)",
            file=sys.stderr,
        )
        return checked
    if not os.environ.get("PULUMI_BACKEND_URL"):
        (root / STATE_DIR).mkdir(exist_ok=True)
    return run(["pulumi", "stack", "select", "--create", stack]) or run(["pulumi", "up", "--stack", stack])


def destroy(argv: list[str] | None = None, *, root: Path = PROJECT_ROOT, run: Runner | None = None) -> int:
    stack, status, _ = _start("destroy", argv, root)
    if stack is None:
        return status
    run = run or run_in(root)
    if not os.environ.get("PULUMI_BACKEND_URL"):
        (root / STATE_DIR).mkdir(exist_ok=True)
    return run(["pulumi", "stack", "select", stack]) or run(["pulumi", "destroy", "--stack", stack])
