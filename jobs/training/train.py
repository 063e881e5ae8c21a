"""Elastic data-parallel training of the workshop CNN on CIFAR-10.

It is over 400 lines because it is the one place a worker's life is told in order (checks, resume, precision,
the loop, the end); the parts it calls live in their own modules.

    torchrun ... -m jobs.training.train --data DIR/cifar-10-batches-py --run-dir RUN_DIR [--epochs 10] [--batch-size N]
                               [--precision auto|fp32|tf32|bf16] [--checkpoint-every-seconds 30]
                               [--[no-]save-on-sigterm] [--trace-samples DIR]

Every worker, in this order:
 1. exits at once if RUN_DIR/model.pt exists: that run is finished (re-running is a no-op);
 2. loads the training split into memory, *before* joining the process group, so a slow read
    from EFS does not eat into the short process-group timeout (meanwhile a thread makes the GPU's
    CUDA context: jobs.training.runtime.DeviceWarmUp);
 3. reads RUN_DIR/checkpoint.pt if there is one: after a worker restart or a change of
    membership the job continues at the step after the last checkpoint instead of starting over;
 4. joins the process group and checks that all workers start from the same place;
 5. trains: every epoch one order of all images, the same at any world size (jobs.data.sampling), each
    step the next W x B images of it split over the W workers. Rank 0 writes the checkpoint after
    every epoch and every --checkpoint-every-seconds, and model.pt at the end. On SIGTERM (a Spot
    notice, a drain, or torchrun re-forming the group) all workers stop after the current step,
    rank 0 having saved it (jobs.elastic.step_boundary, jobs.elastic.stopping).

Without torchrun (`python -m jobs.training.train ...`) it trains alone, the same way.

On a GPU (docs/gpu.md): --precision auto trains under bf16 autocast with channels_last where the GPU
has bf16 units (TF32 on older ones), at a batch of 1024 per worker with the learning rate scaled
to it (jobs.training.recipes.default_lr); on the CPU nothing changes (fp32, batch 128). After the
first step each worker logs how long it took from its process's start, phase by phase
(jobs.training.startup).

What a retry cannot fix ends the run with one line and exit 3 (jobs.exit_codes), also written to
the history (where it is writable) and the container's termination message (jobs.termination): a
checkpoint that fails its check with no good one before it, data that does not match jobs.data.prepare's
record, a full or read-only run directory, a non-finite loss (caught before any checkpoint or
model.pt is written from it).

Two recipes. `improved` (default) fixes the workshop's defects: per-channel normalisation,
random flip + crop augmentation, Nesterov SGD with warm-up and cosine learning-rate decay.
`workshop` is the original plain recipe: pixels / 255, no augmentation, SGD lr 0.001
momentum 0.9 weight decay 1e-4, constant rate. Both reshuffle every epoch (the workshop's
sampler never did, since it never called set_epoch: a bug, not a recipe choice).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from jobs.training import cuda_context

# Run as the worker (`python -m jobs.training.train`, as torchrun starts it): the driver makes the
# GPU's CUDA context in a thread while torch is imported below (jobs.training.cuda_context).
_EARLY_CUDA_CONTEXT = cuda_context.start_in_background() if __name__ == "__main__" else None

import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from jobs import cli  # noqa: E402
from jobs.training import checkpoint  # noqa: E402
from jobs.data import cifar as data  # noqa: E402
from jobs.data import data_record  # noqa: E402
from jobs.training import distributed  # noqa: E402
from jobs.training.distributed import WorkerPlace, join_process_group, maxima_over_workers, wait_for_all_workers  # noqa: E402
from jobs.training.loop import TrainingData, check_finite_loss, check_finite_weights, train_one_epoch  # noqa: E402
from jobs.training.model import ARCHITECTURE, WorkshopCNN  # noqa: E402
from jobs.training.progress import (  # noqa: E402
    CheckpointClock,
    Progress,
    SavedState,
    read_checkpoint,
    recover_epoch_line,
    save_checkpoint,
    set_rejected_aside,
    time_left,
)
from jobs.training.recipes import RECIPES, RunSettings, build_optimizer, default_lr  # noqa: E402
from jobs.training.runtime import (  # noqa: E402
    CPU_BATCH_SIZE,
    GPU_BATCH_SIZE,
    PRECISIONS,
    DeviceWarmUp,
    Precision,
    configure_cpu_threads,
    configure_precision,
    default_batch_size,
    device_for,
    resolve_precision,
)
from jobs.training.startup import StartupClock  # noqa: E402
from jobs.training.sample_trace import SampleTrace  # noqa: E402
from elastic_training.step_boundary import StepBoundary  # noqa: E402
from elastic_training.stopping import StopSignal  # noqa: E402
from jobs.data.transforms import Normalization  # noqa: E402

log = logging.getLogger("jobs.training.train")


# Checkpoints by time, the fallback for a worker lost without a usable SIGTERM (no notice, a
# node gone at once, a kill): that loss is at most this much work. 30 s keeps it within 10 % even at
# one such loss per 5 minutes, is a quarter of Spot's 2-minute notice, and costs one save per 30 s
# (about 0.1 s for this model: docs/elastic-capacity.md "What a preemption costs").
CHECKPOINT_EVERY_SECONDS = 30.0

# Upper bounds of the options: far above any sensible run, low enough that a typo (an extra few
# zeros) is refused in one line instead of running for years or failing deep inside torch.
MAX_EPOCHS = 10_000
MAX_BATCH_SIZE = 65_536  # per worker; CIFAR-10 has 50,000 training images
MAX_LR = 10.0
MAX_PG_TIMEOUT = 3600.0
MAX_CHECKPOINT_EVERY_SECONDS = 86_400.0
MAX_LOG_EVERY = 1_000_000
MAX_SEED = 2**63 - 1


# --- run directory: resume and finish ---------------------------------------------------------


def _save_model(run_dir, model, settings, normalization, split: data.CifarSplit, data_dir: Path) -> None:
    checkpoint.save_atomically(
        {
            "architecture": ARCHITECTURE,
            "state_dict": model.state_dict(),
            "normalization": normalization.to_dict(),
            "class_names": list(split.class_names),
            "settings": asdict(settings),
            "trained_on": str(data_dir),
            "synthetic_data": split.synthetic,
        },
        run_dir / checkpoint.MODEL_NAME,
    )


# --- command line -----------------------------------------------------------------------------


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="python -m jobs.training.train",
        description="Train the workshop CNN on CIFAR-10 (run under torchrun for several workers).",
    )
    parser.add_argument("--data", required=True, type=Path, help="the cifar-10-batches-py folder (required)")
    parser.add_argument(
        "--run-dir", required=True, type=Path, help="where checkpoint.pt, model.pt and history.jsonl go (required)"
    )
    parser.add_argument(
        "--epochs",
        type=cli.bounded_int(1, MAX_EPOCHS),
        default=10,
        help=f"passes over the training split, 1..{MAX_EPOCHS} (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=cli.bounded_int(1, MAX_BATCH_SIZE),
        default=None,
        help=f"images per step per worker, 1..{MAX_BATCH_SIZE} (default: {GPU_BATCH_SIZE} on a GPU, "
        f"{CPU_BATCH_SIZE} on the CPU)",
    )
    parser.add_argument(
        "--lr",
        type=cli.bounded_float(0, MAX_LR, low_inclusive=False),
        default=None,
        help=f"peak learning rate, above 0 up to {MAX_LR:g} (default: by recipe; the improved recipe's "
        "0.05 scaled linearly with --batch-size / 128)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="auto: bf16 autocast on a GPU with bf16 units (compute capability 8.0+), TF32 on an older "
        "GPU, fp32 on the CPU; fp32: strict float32 (no TF32); tf32 and bf16 need a GPU "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        default="improved",
        help="improved (normalisation, augmentation, warm-up + cosine) or the workshop's plain one (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=cli.bounded_int(0, MAX_SEED),
        default=0,
        help="shuffling, augmentation and initial weights, 0..2^63-1 (default: %(default)s)",
    )
    parser.add_argument(
        "--log-every",
        type=cli.bounded_int(1, MAX_LOG_EVERY),
        default=50,
        help="steps between progress lines (default: %(default)s)",
    )
    parser.add_argument(
        "--pg-timeout",
        type=cli.bounded_float(0, MAX_PG_TIMEOUT, low_inclusive=False),
        default=30.0,
        help="seconds a worker waits for a peer in a collective before failing, so its agent restarts the group; "
        f"up to {MAX_PG_TIMEOUT:g} (default: %(default)s)",
    )
    parser.add_argument(
        "--checkpoint-every-seconds",
        type=cli.bounded_float(0, MAX_CHECKPOINT_EVERY_SECONDS),
        default=CHECKPOINT_EVERY_SECONDS,
        help="also checkpoint mid-epoch after this many seconds of training since the last checkpoint; 0: only at "
        "epoch ends. A worker lost without warning costs at most this much work (default: %(default)s)",
    )
    parser.add_argument(
        "--save-on-sigterm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on SIGTERM (Spot notice, drain, re-formation) every worker stops after the current step, rank 0 "
        "having checkpointed it; --no-save-on-sigterm: die at once as before (default: %(default)s)",
    )
    parser.add_argument(
        "--cudnn-benchmark",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="on a GPU, time cuDNN's convolution algorithms once per batch shape and keep the fastest instead of "
        "taking cuDNN's heuristic choice; for this CNN on an H200 it cost 4 s at the first step and more in "
        "the first epoch for 3 %% faster steps after (docs/gpu.md) (default: %(default)s)",
    )
    parser.add_argument(
        "--trace-samples",
        type=Path,
        default=None,
        metavar="DIR",
        help="debugging: every worker writes the image indices of every step to DIR/samples-*.jsonl "
        "(default: %(default)s, no trace)",
    )
    return parser


def parse_args(argv: Sequence[str] | None):
    return build_parser().parse_args(argv)


@dataclass(frozen=True)
class Options:
    """How to run, not what to train: these may change between a checkpoint and its resumption."""

    pg_timeout: float
    log_every: int
    checkpoint_every_seconds: float
    save_on_sigterm: bool
    trace_dir: Path | None
    cudnn_benchmark: bool = False


def main(argv: Sequence[str] | None = None) -> int:
    clock = StartupClock()
    args = parse_args(argv)
    place = WorkerPlace.from_environment()
    cli.configure_logging(f"rank {place.rank}/{place.world_size}")
    run_dir: Path = args.run_dir
    device = device_for(place.local_rank)
    if device.type == "cpu":
        resolve_precision(args.precision, device)  # tf32 or bf16 on the CPU: one line, before anything else
    batch_size = args.batch_size if args.batch_size is not None else default_batch_size(device)
    settings = RunSettings(
        recipe=args.recipe,
        epochs=args.epochs,
        batch_size=batch_size,
        lr=args.lr if args.lr is not None else default_lr(args.recipe, batch_size),
        seed=args.seed,
    )
    options = Options(args.pg_timeout, args.log_every, args.checkpoint_every_seconds, args.save_on_sigterm,
                      args.trace_samples, args.cudnn_benchmark)  # fmt: skip
    if (run_dir / checkpoint.MODEL_NAME).exists():
        log.info("%s exists: this run is finished, nothing to train (a new run directory trains again)",
                 run_dir / checkpoint.MODEL_NAME)  # fmt: skip
        # A crash between writing model.pt and appending `finished` left a complete model whose run the
        # controller would call unfinished (review ctrl-1 item 2): rank 0 records the end it missed.
        if place.is_leader and not any(r.get("event") == "finished" for r in checkpoint.read_history(run_dir)):
            checkpoint.append_history(run_dir, {"event": "finished", "epochs": settings.epochs})
        return cli.EXIT_OK
    # The CUDA context and torch._dynamo's import, while the data is read and checked below.
    warm_up = DeviceWarmUp(device, import_dynamo=place.launched_by_torchrun)

    # Everything that can fail on bad input is checked before anything is written.
    recorded = data_record.read(args.data) if args.data.is_dir() else None
    if recorded is None and args.data.is_dir():
        log.warning("WARNING: %s has no record of jobs.data.prepare (%s): its files cannot be checked for damage",
                    args.data, data_record.MANIFEST_NAME)  # fmt: skip
    split = data.load_split(args.data, "train", recorded)
    if split.synthetic:
        log.warning(
            "WARNING: %s holds SYNTHETIC images, not CIFAR-10 (see its %s file)", args.data, data.SYNTHETIC_MARKER
        )
    if len(split.labels) < place.world_size:
        raise cli.JobError(
            f"{args.data} has {len(split.labels)} training images, fewer than the {place.world_size} workers"
        )
    saved = read_checkpoint(run_dir, settings, len(split.labels))
    clock.lap("data")
    warm_up.wait()
    precision = resolve_precision(args.precision, device)
    clock.lap("waiting for the warm-up")
    clock.background = f"warm-up beside the data: {warm_up.summary()}"
    if device.type == "cuda" and _EARLY_CUDA_CONTEXT is not None:
        clock.background += f"; during the imports: {_EARLY_CUDA_CONTEXT.result()}"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise cli.volume_error(error, f"run directory {run_dir}") from None

    try:
        train_run(run_dir, args.data, split, saved, settings, place, options, device, precision, clock)
    except cli.RunCannotContinue as error:
        if place.is_leader:
            _record_failure(run_dir, error)
        raise
    except RuntimeError as error:
        if not distributed.lost_a_peer(error):
            raise
        # Another worker went away mid-collective (a lost node, a killed pod): expected in an elastic run,
        # so one line, not a traceback; exit 1 lets torchrun re-form the group from the last checkpoint.
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise cli.JobError(
            f"another worker's process went away in the middle of a collective ({first}); "
            "torchrun re-forms the group from the last checkpoint"
        ) from None
    return cli.EXIT_OK


def _record_failure(run_dir: Path, error: cli.RunCannotContinue) -> None:
    """The line that ends the run, in its history too, where the volume still takes it."""
    try:
        checkpoint.append_history(run_dir, {"event": "failed", "exit_code": error.exit_code, "reason": str(error)})
    except (OSError, cli.JobError):
        pass  # the volume is full or read-only: the log and the termination message carry the line


def train_run(
    run_dir: Path,
    data_dir: Path,
    split: data.CifarSplit,
    saved: SavedState | None,
    settings: RunSettings,
    place: WorkerPlace,
    options: Options,
    device: torch.device,
    precision: Precision,
    clock: StartupClock,
) -> None:
    """Train from the checkpoint `saved` (or from scratch) to the end, writing RUN_DIR's files.
    `device` is this thread's current one already (DeviceWarmUp.wait); DistributedDataParallel's
    import of torch._dynamo is done too, before joining the group, so that it never counts against
    the short process-group timeout while a peer waits for us."""
    state, start = (saved.state, saved.progress) if saved else ({}, Progress(0))
    threads = configure_cpu_threads() if device.type == "cpu" else None
    configure_precision(precision, device, options.cudnn_benchmark)
    torch.manual_seed(settings.seed)  # the same initial weights on every worker
    recipe = RECIPES[settings.recipe]
    images = torch.from_numpy(split.images).to(device)
    normalization = Normalization.measured_on(images) if recipe.normalize else Normalization.unit_scale_only()
    train_data = TrainingData(images, torch.from_numpy(split.labels).to(device), normalization, recipe.augment)
    log.info(
        "worker %d of %d (restart %d) on %s%s: %d training images, %s recipe, batch %d per worker, lr %g, %s%s",
        place.rank, place.world_size, place.restart_count, _device_name(device),
        f" with {threads} threads" if threads else "", len(split.labels), settings.recipe, settings.batch_size,
        settings.lr, precision.name, ", channels_last" if precision.channels_last else "",
    )  # fmt: skip
    clock.lap("data to device")
    join_process_group(place, device, options.pg_timeout)
    # One collective: do all workers start from the same place (minimum = maximum), and the
    # group's id, rank 0's clock (it names the group in the history and the sample traces).
    at = (start.epochs_done, start.position)
    agreed = maxima_over_workers([-at[0], at[0], -at[1], at[1], time.time_ns() if place.is_leader else 0], device)
    if (-agreed[0], -agreed[2]) != (agreed[1], agreed[3]):
        raise cli.JobError(f"workers read different checkpoints (epochs done {-agreed[0]} to {agreed[1]}, "
                           f"position {-agreed[2]} to {agreed[3]}); restart the job")  # fmt: skip
    group = agreed[4]
    if place.is_leader:
        checkpoint.remove_stale_temporary_files(run_dir)
        set_rejected_aside(run_dir, saved)
        if recover_epoch_line(run_dir, saved):
            log.info("history.jsonl lacked epoch %d's line (a worker died between writing the checkpoint and it): "
                     "written from the checkpoint", start.epochs_done)  # fmt: skip
        checkpoint.append_history(run_dir, {
            "event": "start", "epochs_done": start.epochs_done, "position": start.position, "epochs": settings.epochs,
            "world_size": place.world_size, "restart_count": place.restart_count, "group": group,
        })  # fmt: skip
    if saved:
        log.info("resuming from %s: %d of %d epochs done%s", saved.path, start.epochs_done,
                 settings.epochs, f", then {start.position} of {len(split.labels)} images of epoch "
                 f"{start.epochs_done + 1}" if start.position else "")  # fmt: skip
    else:
        log.info("no checkpoint in %s: starting at epoch 1 of %d", run_dir, settings.epochs)

    clock.lap("process group")
    plain_model = WorkshopCNN(num_classes=len(split.class_names)).to(device)
    if precision.channels_last:
        # Module.to documents `to(memory_format=torch.channels_last)`; its typed overloads (torch 2.13.0,
        # torch/nn/modules/module.py) leave that form out.
        plain_model = plain_model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if saved:
        plain_model.load_state_dict(state["model"])  # copies into the model's own layout
    model: torch.nn.Module = plain_model
    if place.launched_by_torchrun:
        model = DistributedDataParallel(plain_model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = build_optimizer(model, settings)
    if saved:
        optimizer.load_state_dict(state["optimizer"])

    def save(progress: Progress, epoch_record: dict | None = None) -> None:
        # A mid-epoch checkpoint's sums cover every step since the epoch began, on all workers.
        check_finite_loss(progress.loss_sum, f"epoch {progress.epochs_done + 1}, {progress.position} images into it")
        save_checkpoint(run_dir, plain_model, optimizer, settings, normalization, len(split.labels), progress,
                        epoch_record)  # fmt: skip

    # Neither checkpoints by time nor stopping on SIGTERM: no vote, the loop of old.
    stop_signal = StopSignal() if options.save_on_sigterm else None
    boundary = None
    if options.checkpoint_every_seconds > 0 or stop_signal is not None:
        boundary = StepBoundary(place, run_dir, save, CheckpointClock(options.checkpoint_every_seconds), stop_signal)
    trace = SampleTrace(options.trace_dir, place, group) if options.trace_dir else None
    clock.lap("model")

    def first_step_done() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # once: the step's kernels have run, not only been queued
        clock.lap("first step")
        log.info("%s", clock.summary())

    with stop_signal.watching() if stop_signal else contextlib.nullcontext():
        for epoch in range(start.epochs_done, settings.epochs):
            result = train_one_epoch(model, optimizer, train_data, epoch, settings, place, options.log_every,
                                     start if epoch == start.epochs_done else None,
                                     boundary.after_step if boundary else None, trace, precision,
                                     first_step_done if epoch == start.epochs_done else None)  # fmt: skip
            # Every worker: the loss is summed over all of them, so all stop here alike.
            check_finite_loss(result.loss, f"the end of epoch {epoch + 1}")
            if place.is_leader:
                record = {
                    "event": "epoch", "epoch": epoch + 1, "loss": round(result.loss, 5),
                    "train_accuracy": round(result.accuracy, 5), "images_per_second": round(result.images_per_second, 1),
                    "seconds": round(result.seconds, 3), "world_size": place.world_size,
                }  # fmt: skip
                save(Progress(epoch + 1), epoch_record=record)
                checkpoint.append_history(run_dir, record)
                left = settings.epochs - epoch - 1
                log.info(
                    "epoch %d/%d done: loss %.4f, train accuracy %.2f%%, %.0f images/s, %.1f s; checkpoint saved%s",
                    epoch + 1, settings.epochs, result.loss, 100 * result.accuracy, result.images_per_second,
                    result.seconds, f"; {time_left(left * len(split.labels), result.images_per_second)}" if left else "",
                )  # fmt: skip
            if boundary and epoch + 1 < settings.epochs:
                boundary.after_epoch(epoch + 1)
        if boundary:
            boundary.finish()
        if place.is_leader:
            check_finite_weights(plain_model)
            _save_model(run_dir, plain_model, settings, normalization, split, data_dir)
            checkpoint.append_history(run_dir, {"event": "finished", "epochs": settings.epochs})
            log.info("training finished: model written to %s", run_dir / checkpoint.MODEL_NAME)
    if trace:
        trace.close()
    # If rank 0 dies writing model.pt, the others must fail too, so that torchrun restarts the
    # whole group (which then only writes model.pt) instead of waiting at its exit barrier.
    wait_for_all_workers()


def _device_name(device: torch.device) -> str:
    return f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else str(device)


if __name__ == "__main__":
    # SIGTERM: jobs.elastic.stopping, installed around the training loop only (before and after it, the
    # default action ends the worker at once, which is what torchrun and the kubelet expect).
    cli.run(main, "jobs.training.train", clean_up_on_sigterm=False,
            skip_interpreter_teardown=WorkerPlace.from_environment().launched_by_torchrun)  # fmt: skip
