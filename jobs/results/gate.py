"""The test Job of a stack with its own testCommand: run that command, then check the run's gate.

    python -m jobs.results.gate --metric accuracy --min 0.7 [--run-cost JSON] -- COMMAND...

COMMAND (the stack's testCommand) runs first, with this environment (ELASTIC_TRAINING_RUN_DIR,
ELASTIC_TRAINING_DATA_DIR); its own non-zero exit is this one's. Then $ELASTIC_TRAINING_RUN_DIR/metrics.json
must hold a number under --metric that is at least --min: otherwise one line and exit 3 (a retry cannot
help: elastic_training.exit_codes), which fails the Job and so `pulumi up`. --run-cost (the wait's
measure of the run) goes into the run's history, as jobs.results.evaluate keeps it.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
from collections.abc import Sequence
from pathlib import Path

from elastic_training import exit_codes, history, run_directory
from jobs import cli
from jobs.training import checkpoint

log = logging.getLogger("jobs.results.gate")


class BelowGate(cli.RunCannotContinue):
    """The model's metric is below the stack's gate: a retry of the test cannot change it."""


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m jobs.results.gate", description=__doc__.splitlines()[0])
    parser.add_argument("--metric", required=True, help="the key of metrics.json the gate reads (required)")
    parser.add_argument("--min", type=float, required=True, help="its least value that passes (required)")
    parser.add_argument(
        "--run-cost", type=_json_object, default=None, help="the run's cost record, kept in its history (default: none)"
    )
    parser.add_argument("command", nargs="+", help="the test command, after --")
    return parser


def _json_object(text: str) -> dict:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


_json_object.__name__ = "JSON object"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cli.configure_logging()
    run_dir = run_directory.from_environment()
    if run_dir is None:
        raise cli.UsageError(f"{run_directory.RUN_DIR_ENV} is not set: the run directory holds metrics.json")
    try:
        status = subprocess.run(args.command, check=False).returncode
    except OSError as error:  # not found, not executable: what a shell would report
        raise cli.JobError(f"cannot run the test command {args.command[0]!r}: {error.strerror}") from None
    if status != 0:
        log.info("the test command exited %d", exit_codes.from_returncode(status))
        return exit_codes.from_returncode(status)
    path = run_dir / run_directory.METRICS
    value = _metric(path, args.metric)
    if args.run_cost:
        checkpoint.append_history(run_dir, {"event": history.RUN_COST, **args.run_cost})
    checkpoint.append_history(
        run_dir, {"event": history.EVALUATED, "metric": args.metric, "value": value, "min": args.min}
    )
    if value < args.min:
        raise BelowGate(f"{args.metric} {value:g} in {path} is below the gate {args.min:g} (minGate)")
    log.info("%s %g reaches the gate %g", args.metric, value, args.min)
    return exit_codes.OK


def _metric(path: Path, name: str) -> float:
    try:
        metrics = json.loads(path.read_text())
    except FileNotFoundError:
        raise BelowGate(f"the test command wrote no {path}: the gate reads {name} there") from None
    except (OSError, ValueError) as error:
        raise BelowGate(f"{path} is not readable JSON ({error}): the gate reads {name} there") from None
    value = metrics.get(name) if isinstance(metrics, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        found = sorted(metrics) if isinstance(metrics, dict) else type(metrics).__name__
        raise BelowGate(f"{path} has no number under {name!r} (gateMetric): it has {found}")
    return float(value)


if __name__ == "__main__":
    cli.run(main, "jobs.results.gate")
