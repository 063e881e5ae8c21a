"""`elastic-training local`: the whole pipeline on this machine, on CPU, with no cloud.

(It is over 400 lines because a run's lifecycle on this machine, claiming, locking, checking free space, running the
steps and resuming, is one sequence that reads best in one file; the own-script path is in local_script.py.)

prepare -> train (2 local workers, torchrun) -> evaluate: the same jobs/ code the pods run.
  elastic-training local             generated data in CIFAR-10's format (works offline)
  elastic-training local --cifar10   the real CIFAR-10 (downloads 170 MB, checks its MD5)
Each call is a new run, runs/<data>/run-<n>/ (model.pt, metrics.json) in the project folder; `--run-id
run-<n>` goes back to one: it resumes an unfinished run with the epochs it was started with and only
re-evaluates a finished one (jobs.training.train trains nothing in a run directory that holds model.pt).

Any torchrun script instead (infra/cli/local_script.py: under our agent and store, as the pods run it):
  elastic-training local --script PATH [--nproc N] [-- SCRIPT_ARGS...]
  elastic-training local --module NAME [--nproc N] [-- SCRIPT_ARGS...]

A run directory is used by one `local` at a time (a lock). The steps' own messages on stderr go to
local.log in the run directory; a failing step's one-line error is printed. Ctrl-C stops the steps
(the training saves its checkpoint on the way out) and prints the command that resumes the run.

Exit status: 0 done; 2 usage (or the run directory is in use); 3 the disk is full or read-only (checked
before the run too); 130 interrupted (Ctrl-C); another failing step's own status otherwise.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from elastic_training import exit_codes, run_directory
from infra.cli import local_script
from infra.cli.args import PROJECT_ROOT, OneLineParser, UsageError, whole_number
from infra.config.stack_file import shown

# The jobs' exit statuses (jobs/exit_codes.py; infra/ does not import jobs/, tests/cli/test_local_mistakes.py
# compares the two): 1 may pass on a retry, 2 usage, 3 cannot continue (a full or read-only disk among them).
FAILURE, USAGE, CANNOT_CONTINUE = 1, 2, 3
# jobs.training.train's --epochs bound (jobs/training/train.py MAX_EPOCHS): refused here before a run is made.
MAX_EPOCHS = 10_000
# Where a worker that fails for good leaves "<code> <line>" (jobs/termination.py PERMANENT_FAILURE_FILE_ENV).
PERMANENT_FAILURE_FILE_ENV = "JOBS_PERMANENT_FAILURE_FILE"

# What a run writes, at most, besides the data: the model, the checkpoint and its fallback copy, the
# history and the log, each a few MB for this CNN; the floor leaves room for them with a margin.
MIN_FREE_BYTES_RUN = 256 * 1024**2
# CIFAR-10 the first time: the 170 MB archive (jobs/data/cifar.py) and the extracted batches beside it.
MIN_FREE_BYTES_CIFAR10_DOWNLOAD = 512 * 1024**2
# How long the steps get to stop after Ctrl-C (the training saves a checkpoint on SIGTERM) before SIGKILL.
STOP_GRACE_SECONDS = 60
LOG_NAME = "local.log"
# What `local` records about a run when it creates it: a later `--run-id` resumes with the same epochs.
RUN_RECORD = "local.json"
LOCK_NAME = ".local.lock"
INTERRUPTED = exit_codes.INTERRUPTED  # 130 = 128 + SIGINT, as a shell reports it


MAX_NPROC = 16  # processes on one machine; far above what a laptop trains well with
DEFAULT_NPROC = 2


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training local", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--cifar10",
        action="store_true",
        default=False,
        help="train on the real CIFAR-10, downloaded once (default: off, generated data)",
    )
    parser.add_argument(
        "--epochs",
        type=whole_number("--epochs", 1, MAX_EPOCHS),
        default=None,
        help="epochs to train (default: 3 on generated data, 10 on CIFAR-10; with --run-id, the run's own)",
    )
    parser.add_argument(
        "--run-id", default=None, help="the run to go back to, e.g. run-1 (default: a new run, the next free run-<n>)"
    )
    own = parser.add_mutually_exclusive_group()
    own.add_argument(
        "--script",
        default=None,
        metavar="PATH",
        help="run this torchrun script instead of the CIFAR-10 pipeline; its arguments follow `--` (default: none)",
    )
    own.add_argument(
        "--module",
        default=None,
        metavar="NAME",
        help="run `python -m NAME` as the torchrun script instead (default: none)",
    )
    parser.add_argument(
        "--nproc",
        type=whole_number("--nproc", 1, MAX_NPROC),
        default=None,
        help=f"workers for --script/--module, 1..{MAX_NPROC}, one agent each (default: {DEFAULT_NPROC})",
    )
    return parser


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A job's own one-line error (jobs/cli.py `run`): "<prog>: error: <line>".
JOB_ERROR = re.compile(r"^[\w.-]+: error: .+")


class LocalError(Exception):
    """One line for the user, and the exit status that goes with it."""

    def __init__(self, message: str, code: int = USAGE):
        super().__init__(message)
        self.code = code


def data_name(cifar10: bool) -> str:
    return "cifar10" if cifar10 else "synthetic"


def default_epochs(cifar10: bool) -> int:
    return 10 if cifar10 else 3


def next_run_id(runs: Path) -> str:
    """run-<n>, one past the highest run-<n> in runs/<data>/."""
    taken = [
        int(match[1])
        for path in (runs.iterdir() if runs.is_dir() else [])
        for match in [re.fullmatch(r"run-([0-9]+)", path.name)]
        if match
    ]
    return f"run-{max(taken, default=0) + 1}"


def claim_new_run(runs: Path) -> str:
    """Create the next free run-<n> directory; mkdir fails on one another `local` created first, so two
    `local` started at once never share a run."""
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = next_run_id(runs)
        try:
            (runs / run_id).mkdir()
        except FileExistsError:
            continue
        return run_id


def steps(cifar10: bool, epochs: int | None, python: str = sys.executable, run_id: str = "run-1") -> list[list[str]]:
    name = data_name(cifar10)
    source, batch = ([], 128) if cifar10 else (["--synthetic", "100"], 50)
    data, run = f"data/{name}/cifar-10-batches-py", f"runs/{name}/{run_id}"
    return [
        [python, "-m", "jobs.data.prepare", "--dest", f"data/{name}", *source],
        # torchrun is torch.distributed.run's console script; the module form needs no PATH.
        [
            python,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            "--nproc_per_node=2",
            "-m",
            "jobs.training.train",
            "--data",
            data,
            "--run-dir",
            run,
            "--epochs",
            str(epochs or default_epochs(cifar10)),
            "--batch-size",
            str(batch),
        ],
        [
            python,
            "-m",
            "jobs.results.evaluate",
            "--data",
            data,
            "--model",
            f"{run}/{run_directory.MODEL}",
            "--metrics-out",
            f"{run}/{run_directory.METRICS}",
        ],
    ]


MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _run_epochs(run: Path) -> int | None:
    """The epochs a run was started with: local's own record, else the training's last start line."""
    try:
        return int(json.loads((run / RUN_RECORD).read_text(encoding="utf-8"))["epochs"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        lines = (run / run_directory.HISTORY).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    starts = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == "start" and isinstance(record.get("epochs"), int):
            starts.append(record["epochs"])
    return starts[-1] if starts else None


def resume_epochs(run: Path, run_id: str, asked: int | None, runs: Path) -> int | None:
    """The epochs to pass when going back to a run; refuses what would be dropped or refused later."""
    if not run.is_dir():
        known = sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []
        raise LocalError(
            f"--run-id {run_id}: there is no run {shown(run)} (runs there: {' '.join(known) or 'none'}); "
            "leave out --run-id to start a new run"
        )
    recorded = _run_epochs(run)
    if (run / run_directory.MODEL).exists():
        if asked is not None and asked != recorded:
            raise LocalError(
                f"--epochs {asked}: run {run_id} is finished ({recorded or 'its'} epochs), so it only "
                "re-evaluates and trains no more; leave out --run-id to train a new run with "
                f"--epochs {asked}"
            )
        return recorded
    if asked is not None and recorded is not None and asked != recorded:
        raise LocalError(
            f"--epochs {asked}: run {run_id} was started with {recorded} epochs and resumes only with those; "
            f"leave out --epochs to resume it, or leave out --run-id to start a new run with --epochs {asked}"
        )
    return asked if asked is not None else recorded


def lock_run(run: Path) -> IO[str]:
    """Hold the run directory for this process (released when it exits); one line if another holds it."""
    try:
        handle = open(run / LOCK_NAME, "a+", encoding="utf-8")
    except OSError as error:
        raise LocalError(f"cannot write {shown(run)}: {error.strerror or error}", _disk_code(error)) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise LocalError(
            f"run {shown(run)} is in use by another `elastic-training local` ({holder}); wait for it to "
            "end, or leave out --run-id to start a new run"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle


def _disk_code(error: OSError) -> int:
    full_or_read_only = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
    return CANNOT_CONTINUE if error.errno in full_or_read_only else FAILURE


def check_free_space(path: Path, needed: int) -> None:
    """Refuse before an epoch is spent: a full disk is otherwise only noticed at the first checkpoint."""
    free = shutil.disk_usage(path).free
    if free < needed:
        raise LocalError(
            f"only {free / 1024**2:.0f} MiB free on the disk of {shown(path)}; a run needs at least "
            f"{needed / 1024**2:.0f} MiB: free some space, then rerun",
            CANNOT_CONTINUE,
        )


@dataclass
class StepResult:
    code: int
    errors: list[str]  # the step's own one-line errors, in order
    last_line: str  # the last line it wrote to stderr (what to show when it wrote no one-line error)


def run_step(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> StepResult:
    """Run one step in its own process group (so Ctrl-C reaches `local` only, which then stops it in
    order), its stdout on ours, its stderr into `log`."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    errors: list[str] = []
    tail: collections.deque[str] = collections.deque(maxlen=1)

    def copy() -> None:
        assert process.stderr is not None
        try:
            out = open(log, "a", encoding="utf-8")
        except OSError:
            out = None  # a full or read-only disk: the lines are still read, and the errors kept
        with process.stderr:
            for line in process.stderr:
                if out is not None:
                    try:
                        out.write(line)
                        out.flush()
                    except OSError:
                        pass
                if line.strip():
                    tail.append(line.strip())
                if JOB_ERROR.match(line.strip()):
                    errors.append(line.strip())
        if out is not None:
            try:
                out.close()
            except OSError:
                pass

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    try:
        code = process.wait()
    except KeyboardInterrupt:
        _stop(process)
        reader.join(timeout=5)
        raise
    reader.join()
    return StepResult(code, errors, tail[0] if tail else "")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the step's whole group (torchrun and its workers save and exit), SIGKILL if it lingers
    or on a second Ctrl-C."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_GRACE_SECONDS)
    except KeyboardInterrupt:
        pass
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def read_permanent_failure(path: Path) -> tuple[int, str] | None:
    """(exit code, line) a worker left in PERMANENT_FAILURE_FILE_ENV's file, or None."""
    try:
        code, _, line = path.read_text(encoding="utf-8").strip().partition(" ")
        return int(code), line
    except (OSError, ValueError):
        return None


def resume_command(cifar10: bool, run_id: str) -> str:
    return "elastic-training local" + (" --cifar10" if cifar10 else "") + f" --run-id {run_id}"


def main(
    argv: list[str] | None = None,
    root: Path = PROJECT_ROOT,
    step_runner: Callable[[list[str], Path, dict[str, str], Path], StepResult] = run_step,
) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` belongs to the script.
    script_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
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
    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        print(f"local: --run-id {args.run_id!r} is invalid: letters, digits, '.', '_' and '-' only", file=sys.stderr)
        return 2
    runs = root / "runs" / data_name(args.cifar10)
    for folder in (runs.parent, runs):
        if folder.exists() and not folder.is_dir():
            print(
                f"local: {shown(folder)} is a file, not the folder of the runs: move it away, then rerun",
                file=sys.stderr,
            )
            return USAGE
    created: Path | None = None
    try:
        if args.run_id is None:
            epochs = args.epochs
            run_id = claim_new_run(runs)
            created = runs / run_id
        else:
            run_id = args.run_id
            epochs = resume_epochs(runs / run_id, run_id, args.epochs, runs)
        run = runs / run_id
        lock = lock_run(run)
        needed = MIN_FREE_BYTES_RUN
        if args.cifar10 and not (root / "data" / "cifar10" / "cifar-10-batches-py").is_dir():
            needed += MIN_FREE_BYTES_CIFAR10_DOWNLOAD
        check_free_space(run, needed)
        epochs = epochs or default_epochs(args.cifar10)
        if not (run / RUN_RECORD).exists():
            (run / RUN_RECORD).write_text(json.dumps({"epochs": epochs}) + "\n", encoding="utf-8")
    except (LocalError, OSError) as error:
        if created is not None:  # a new run that never started leaves no empty run-<n> behind
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(error, LocalError):
            print(f"local: {error}", file=sys.stderr)
            return error.code
        print(f"local: cannot write {shown(runs)}: {error.strerror or error}", file=sys.stderr)
        return _disk_code(error)
    with lock:
        print(
            f"local: run {run_id} in {shown(run)} (project folder {shown(root)}); the steps' messages go to "
            f"{shown(run / LOG_NAME)}",
            file=sys.stderr,
        )
        return _run_steps(args.cifar10, epochs, run_id, run, root, step_runner)


def _run_steps(
    cifar10: bool,
    epochs: int,
    run_id: str,
    run: Path,
    root: Path,
    step_runner: Callable[[list[str], Path, dict[str, str], Path], StepResult],
) -> int:
    with tempfile.TemporaryDirectory(prefix="elastic-training-local-") as scratch:
        notice = Path(scratch) / "permanent-failure"
        # A worker that fails for good leaves its line here (jobs/termination.py), which torchrun's own exit
        # status (1) would hide; PYTHONUNBUFFERED: the steps' progress reaches the terminal as it is written.
        env = {**os.environ, PERMANENT_FAILURE_FILE_ENV: str(notice), "PYTHONUNBUFFERED": "1"}
        for command in steps(cifar10, epochs, run_id=run_id):
            try:
                result = step_runner(command, root, env, run / LOG_NAME)
            except KeyboardInterrupt:
                print(
                    f"local: interrupted (Ctrl-C); run {run_id} keeps what it saved. Resume it with: "
                    f"{resume_command(cifar10, run_id)}",
                    file=sys.stderr,
                )
                return INTERRUPTED
            if result.code == 0:
                continue
            permanent = read_permanent_failure(notice)
            code, line = permanent if permanent else (result.code, None)
            line = line or (result.errors[-1] if result.errors else result.last_line) or "no message"
            step = command[command.index("-m") + 1] if "-m" in command else command[0]
            if "torch.distributed.run" in command:
                step = "jobs.training.train"
            print(
                f"local: {step} failed (exit {code}): {line} (all its messages: {shown(run / LOG_NAME)})",
                file=sys.stderr,
            )
            return code
    return 0


def _own_script(args, script_args: list[str], root: Path) -> int:
    if args.cifar10 or args.epochs is not None:
        print(
            "local: --cifar10 and --epochs are the CIFAR-10 pipeline's; pass your script's own options after `--`",
            file=sys.stderr,
        )
        return 2
    nproc = DEFAULT_NPROC if args.nproc is None else args.nproc  # within 1..MAX_NPROC: its type checked it
    if args.script and not Path(args.script).is_file():
        print(f"local: --script {args.script}: no such file", file=sys.stderr)
        return 2
    if args.module and not MODULE_NAME.fullmatch(args.module):
        print(
            f"local: --module {args.module!r} is invalid: a Python module name such as mytrain or pkg.train",
            file=sys.stderr,
        )
        return 2
    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        print(f"local: --run-id {args.run_id!r} is invalid: letters, digits, '.', '_' and '-' only", file=sys.stderr)
        return 2
    name = local_script.target_name(args.script, args.module)
    target = [args.script] if args.script else ["-m", args.module]
    run_id = args.run_id or next_run_id(root / "runs" / name)
    return local_script.run([*target, *script_args], name, nproc, run_id, root)
