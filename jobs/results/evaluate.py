"""Test a trained model on CIFAR-10's test split; the quality gate of the test Job.

    python -m jobs.results.evaluate --data DIR/cifar-10-batches-py --model RUN_DIR/model.pt [--metrics-out FILE] [--min-accuracy F]

Prints overall and per-class accuracy, writes them as JSON (default: metrics.json next to the
model), and exits 3 when accuracy is below --min-accuracy (no gate by default; the stack's test Job
passes its minAccuracy, 0.7 unless the stack sets another).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from elastic_training import run_directory
from jobs import cli
from jobs.training import checkpoint
from jobs.data import cifar as data
from jobs.data import data_record
from jobs.training.model import ARCHITECTURE, WorkshopCNN
from jobs.training.runtime import choose_device, configure_cpu_threads
from jobs.data.transforms import Normalization

log = logging.getLogger("jobs.results.evaluate")
MAX_BATCH_SIZE = 65_536


class AccuracyBelowGate(cli.JobError):
    exit_code = cli.EXIT_BELOW_GATE


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1 (e.g. 0.7 for 70 %), got {text}")
    return value


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m jobs.results.evaluate", description="Accuracy of a trained model on the test split."
    )
    parser.add_argument("--data", required=True, type=Path, help="the cifar-10-batches-py folder (required)")
    parser.add_argument(
        "--model", required=True, type=Path, help="RUN_DIR/model.pt written by jobs.training.train (required)"
    )
    parser.add_argument("--metrics-out", type=Path, default=None,
                        help="JSON file to write (default: metrics.json next to --model)")  # fmt: skip
    parser.add_argument(
        "--min-accuracy",
        type=fraction,
        default=None,
        help="fail (exit 3) below this fraction, 0..1 (default: no gate; the stack's test Job passes minAccuracy)",
    )
    parser.add_argument(
        "--run-cost",
        type=_run_cost,
        default=None,
        help="the training run's cost as the stack measured it (JSON object, infra/components/run_cost.py); "
        "kept in metrics.json and history.jsonl beside the model (default: none)",
    )
    parser.add_argument(
        "--batch-size",
        type=cli.bounded_int(1, MAX_BATCH_SIZE),
        default=500,
        help="images per forward pass (default: %(default)s)",
    )
    return parser


def parse_args(argv: Sequence[str] | None):
    return build_parser().parse_args(argv)


def load_model(path: Path, device: torch.device) -> tuple[WorkshopCNN, Normalization]:
    saved = checkpoint.load(path, "model")
    if saved.get("architecture") != ARCHITECTURE:
        raise cli.JobError(
            f"{path} is not a {ARCHITECTURE} model written by jobs.training.train (a checkpoint.pt, perhaps?)"
        )
    model = WorkshopCNN(num_classes=len(saved["class_names"]))
    try:
        model.load_state_dict(saved["state_dict"])
    except RuntimeError as error:
        raise cli.JobError(f"{path} does not fit the {ARCHITECTURE} network: {str(error).splitlines()[0]}") from None
    # eval(): batch normalisation uses the statistics learnt in training, not the test batch's
    # (the workshop's test script forgot this).
    return model.to(device).eval(), Normalization.from_dict(saved["normalization"])


@torch.inference_mode()
def predict(model: WorkshopCNN, normalization: Normalization, images: torch.Tensor, batch_size: int) -> torch.Tensor:
    return torch.cat([model(normalization.apply(batch)).argmax(dim=1) for batch in images.split(batch_size)])


def accuracy_report(predictions: torch.Tensor, labels: torch.Tensor, class_names: Sequence[str]) -> dict:
    hits = (predictions == labels).to(torch.int64)
    correct_per_class = torch.bincount(labels, weights=hits, minlength=len(class_names)).to(torch.int64)
    total_per_class = torch.bincount(labels, minlength=len(class_names))
    return {
        "accuracy": hits.sum().item() / len(labels),
        "correct": hits.sum().item(),
        "total": len(labels),
        "per_class": {
            name: {
                "accuracy": (correct / total) if total else None,
                "correct": correct,
                "total": total,
            }
            for name, correct, total in zip(class_names, correct_per_class.tolist(), total_per_class.tolist())
        },
    }


def _run_cost(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object (the stack's runCost)")
    return value


def write_json_atomically(payload: dict, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(json.dumps(payload, indent=2) + "\n")
        os.replace(temporary, path)
    except BaseException as error:
        # SystemExit from SIGTERM (cli.run) too: no temporary is left in the run directory.
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only volume refuses the unlink too: nothing was created there
        if isinstance(error, OSError):
            raise cli.volume_error(error, f"metrics to {path}") from None
        raise


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cli.configure_logging()
    metrics_path = args.metrics_out or args.model.parent / run_directory.METRICS
    test = data.load_split(args.data, "test", data_record.read(args.data) if args.data.is_dir() else None)
    if test.synthetic:
        log.warning(
            "WARNING: %s holds SYNTHETIC images, not CIFAR-10: this accuracy says nothing about CIFAR-10", args.data
        )
    device = choose_device()
    if device.type == "cpu":
        configure_cpu_threads()
    model, normalization = load_model(args.model, device)

    predictions = predict(model, normalization, torch.from_numpy(test.images).to(device), args.batch_size)
    report = accuracy_report(predictions.cpu(), torch.from_numpy(test.labels), test.class_names)
    passed = args.min_accuracy is None or report["accuracy"] >= args.min_accuracy
    report.update(
        model=str(args.model),
        data=str(args.data),
        synthetic_data=test.synthetic,
        min_accuracy=args.min_accuracy,
        passed=passed,
    )
    if args.run_cost:
        # The run's history on the shared volume keeps what the run cost, beside its epochs.
        report["run_cost"] = args.run_cost
        checkpoint.append_history(args.model.parent, {"event": "run-cost", **args.run_cost})

    # The workshop's summary line, kept word for word for anyone who parses it.
    # One line: the workshop's words, as anyone who parses them expects, then the exact figures.
    log.info(
        "Accuracy of the network on the %d test images: %d %% (%.2f%%, %d of %d correct)",
        report["total"],
        int(100 * report["accuracy"]),
        100 * report["accuracy"],
        report["correct"],
        report["total"],
    )
    for name, result in report["per_class"].items():
        if result["total"]:
            log.info("  %-10s %6.2f%% (%d of %d)", name, 100 * result["accuracy"], result["correct"], result["total"])
    write_json_atomically(report, metrics_path)
    log.info("metrics written to %s", metrics_path)

    if not passed:
        raise AccuracyBelowGate(f"accuracy {report['accuracy']:.4f} is below --min-accuracy {args.min_accuracy:g}")
    return cli.EXIT_OK


if __name__ == "__main__":
    cli.run(main, "jobs.results.evaluate")
