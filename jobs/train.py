"""Elastic data-parallel training of the workshop CNN on CIFAR-10.

    torchrun ... -m jobs.train --data DIR/cifar-10-batches-py --run-dir RUN_DIR [--epochs 10] [--batch-size 128]

Every worker, in this order:
 1. exits at once if RUN_DIR/model.pt exists: that run is finished (re-running is a no-op);
 2. loads the training split into memory, *before* joining the process group, so a slow read
    from EFS does not eat into the short process-group timeout;
 3. reads RUN_DIR/checkpoint.pt if there is one: after a worker restart or a change of
    membership the job continues after the last finished epoch instead of starting over;
 4. joins the process group and checks that all workers start from the same epoch;
 5. trains: every epoch a new shuffle shared by all workers, each worker taking an equal share;
    rank 0 writes the checkpoint after every epoch and model.pt at the end.

Without torchrun (`python -m jobs.train ...`) it trains alone, the same way.

Two recipes. `improved` (default) fixes the workshop's defects: per-channel normalisation,
random flip + crop augmentation, Nesterov SGD with warm-up and cosine learning-rate decay.
`workshop` is the original plain recipe: pixels / 255, no augmentation, SGD lr 0.001
momentum 0.9 weight decay 1e-4, constant rate. Both reshuffle every epoch (the workshop's
sampler never did, since it never called set_epoch: a bug, not a recipe choice).
"""

from __future__ import annotations

import importlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from jobs import checkpoint, cli, data
from jobs.distributed import (
    WorkerPlace,
    join_process_group,
    smallest_and_largest,
    sum_over_workers,
    wait_for_all_workers,
)
from jobs.model import ARCHITECTURE, WorkshopCNN
from jobs.runtime import choose_device, configure_cpu_threads
from jobs.transforms import Normalization, random_flip_and_crop

log = logging.getLogger("jobs.train")


@dataclass(frozen=True)
class Recipe:
    default_lr: float
    momentum: float
    nesterov: bool
    weight_decay: float
    normalize: bool  # per-channel mean/std, measured on the training split
    augment: bool  # random horizontal flip + random crop with 4 pixels of padding
    warmup_and_cosine: bool  # else a constant learning rate


RECIPES = {
    "improved": Recipe(0.05, 0.9, True, 5e-4, normalize=True, augment=True, warmup_and_cosine=True),
    "workshop": Recipe(0.001, 0.9, False, 1e-4, normalize=False, augment=False, warmup_and_cosine=False),
}


@dataclass(frozen=True)
class RunSettings:
    """What defines a run. A checkpoint only resumes a run with exactly these settings."""

    recipe: str
    epochs: int
    batch_size: int  # per worker, as in the workshop
    lr: float
    seed: int


# --- the training loop (also what benchmarks/train_throughput.py measures) -------------------


@dataclass
class TrainingData:
    images: torch.Tensor  # uint8 (N, 3, 32, 32), on the training device
    labels: torch.Tensor  # int64 (N,), on the training device
    normalization: Normalization
    augment: bool


@dataclass(frozen=True)
class EpochResult:
    loss: float  # mean over every image all workers saw
    accuracy: float  # on the (augmented) training images
    images: int  # all workers together
    seconds: float

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds


def learning_rate(settings: RunSettings, progress: float) -> float:
    """The rate after `progress` epochs (fractional). Improved recipe: linear warm-up from
    lr/10 over the first epoch (large early steps on a freshly initialised network diverge),
    then cosine decay to 0 at the last step. A function of progress only, so a resumed or
    resized run gets exactly the rate an uninterrupted one would have had."""
    if not RECIPES[settings.recipe].warmup_and_cosine:
        return settings.lr
    warmup = 1.0 if settings.epochs > 1 else 0.0
    if progress < warmup:
        return settings.lr * (0.1 + 0.9 * progress / warmup)
    decay_progress = (progress - warmup) / (settings.epochs - warmup)
    return settings.lr * 0.5 * (1 + math.cos(math.pi * min(decay_progress, 1.0)))


def epoch_batches(num_images: int, epoch: int, settings: RunSettings, place: WorkerPlace, device: torch.device):
    """This worker's batches of image indices for one epoch.

    All workers draw the same permutation (seeded by run seed and epoch, so it changes every
    epoch) and each takes its own contiguous, equal share. Equal shares give every worker the
    same number of steps, which DDP needs; the few images left over are in next epoch's shares.
    """
    generator = torch.Generator().manual_seed(settings.seed * 100_003 + epoch)
    order = torch.randperm(num_images, generator=generator)
    share = num_images // place.world_size
    mine = order[place.rank * share : (place.rank + 1) * share].to(device)
    return mine.split(settings.batch_size)


def train_one_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_data: TrainingData,
    epoch: int,
    settings: RunSettings,
    place: WorkerPlace,
    log_every: int = 50,
) -> EpochResult:
    device = train_data.images.device
    batches = epoch_batches(len(train_data.images), epoch, settings, place, device)
    augmentation_rng = torch.Generator(device=device).manual_seed(settings.seed * 100_003 + epoch * 1_009 + place.rank)
    # Running sums stay on the device: reading them every step would stall a GPU.
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    model.train()
    started = interval_start = time.perf_counter()
    for step, indices in enumerate(batches, start=1):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(settings, epoch + (step - 1) / len(batches))
        images = train_data.images[indices]
        labels = train_data.labels[indices]
        if train_data.augment:
            images = random_flip_and_crop(images, augmentation_rng)
        outputs = model(train_data.normalization.apply(images))
        loss = F.cross_entropy(outputs, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

        loss_sum += loss.detach() * len(labels)
        correct += (outputs.detach().argmax(dim=1) == labels).sum()
        if place.is_leader and log_every and (step % log_every == 0 or step == len(batches)):
            now = time.perf_counter()
            steps_in_interval = (step - 1) % log_every + 1
            log.info(
                "epoch %d/%d step %d/%d loss %.4f lr %.5f %.0f images/s",
                epoch + 1, settings.epochs, step, len(batches), loss.item(),
                optimizer.param_groups[0]["lr"],
                steps_in_interval * settings.batch_size * place.world_size / (now - interval_start),
            )  # fmt: skip
            interval_start = now

    seen = sum(len(indices) for indices in batches)
    totals = sum_over_workers(torch.stack([loss_sum, correct.to(torch.float64), torch.tensor(float(seen), device=device)]))
    loss_total, correct_total, seen_total = totals.tolist()
    return EpochResult(loss_total / seen_total, correct_total / seen_total, int(seen_total), time.perf_counter() - started)


def build_optimizer(model: nn.Module, settings: RunSettings) -> torch.optim.SGD:
    recipe = RECIPES[settings.recipe]
    return torch.optim.SGD(
        model.parameters(),
        lr=settings.lr,
        momentum=recipe.momentum,
        nesterov=recipe.nesterov,
        weight_decay=recipe.weight_decay,
    )


# --- run directory: resume and finish ---------------------------------------------------------


def read_checkpoint(run_dir: Path, settings: RunSettings) -> dict | None:
    path = run_dir / checkpoint.CHECKPOINT_NAME
    if not path.exists():
        return None
    saved = checkpoint.load(path, "checkpoint")
    saved_settings = saved.get("settings", {})
    differences = [
        f"{name} {saved_settings.get(name)!r} there, {value!r} now"
        for name, value in asdict(settings).items()
        if saved_settings.get(name) != value
    ]
    if differences:
        raise cli.JobError(
            f"{path} belongs to a run with other settings ({'; '.join(differences)}): "
            "rerun with the same settings to resume it, or pass a new --run-dir"
        )
    return saved


def _save_checkpoint(run_dir, model, optimizer, settings, normalization, epochs_done) -> None:
    checkpoint.save_atomically(
        {
            "settings": asdict(settings),
            "epochs_done": epochs_done,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "normalization": normalization.to_dict(),
        },
        run_dir / checkpoint.CHECKPOINT_NAME,
    )


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
        prog="python -m jobs.train",
        description="Train the workshop CNN on CIFAR-10 (run under torchrun for several workers).",
    )
    parser.add_argument("--data", required=True, type=Path, help="the cifar-10-batches-py folder (required)")
    parser.add_argument("--run-dir", required=True, type=Path, help="where checkpoint.pt, model.pt and history.jsonl go (required)")
    parser.add_argument("--epochs", type=cli.positive_int, default=10, help="passes over the training split (default: %(default)s)")
    parser.add_argument("--batch-size", type=cli.positive_int, default=128, help="images per step per worker (default: %(default)s)")
    parser.add_argument("--lr", type=cli.positive_float, default=None, help="peak learning rate (default: by recipe)")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="improved",
                        help="improved (normalisation, augmentation, warm-up + cosine) or the workshop's plain one (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="shuffling, augmentation and initial weights (default: %(default)s)")
    parser.add_argument("--log-every", type=cli.positive_int, default=50, help="steps between progress lines (default: %(default)s)")
    parser.add_argument(
        "--pg-timeout",
        type=cli.positive_float,
        default=30.0,
        help="seconds a worker waits for a peer in a collective before failing, so its agent restarts the group "
             "(default: %(default)s)",
    )
    return parser


def parse_args(argv: Sequence[str] | None):
    return build_parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    place = WorkerPlace.from_environment()
    cli.configure_logging(f"rank {place.rank}/{place.world_size}")
    run_dir: Path = args.run_dir
    settings = RunSettings(
        recipe=args.recipe,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr if args.lr is not None else RECIPES[args.recipe].default_lr,
        seed=args.seed,
    )
    if (run_dir / checkpoint.MODEL_NAME).exists():
        log.info("%s exists: this run is finished, nothing to train (use a new --run-dir to train again)",
                 run_dir / checkpoint.MODEL_NAME)  # fmt: skip
        return cli.EXIT_OK

    # Everything that can fail on bad input is checked before anything is written.
    split = data.load_split(args.data, "train")
    if split.synthetic:
        log.warning("WARNING: %s holds SYNTHETIC images, not CIFAR-10 (see its %s file)", args.data, data.SYNTHETIC_MARKER)
    if len(split.labels) < place.world_size:
        raise cli.JobError(f"{args.data} has {len(split.labels)} training images, fewer than the {place.world_size} workers")
    saved = read_checkpoint(run_dir, settings)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise cli.JobError(f"cannot create run directory {run_dir}: {error.strerror}") from None

    train_run(run_dir, args.data, split, saved, settings, place, args.pg_timeout, args.log_every)
    return cli.EXIT_OK


def train_run(
    run_dir: Path,
    data_dir: Path,
    split: data.CifarSplit,
    saved: dict | None,
    settings: RunSettings,
    place: WorkerPlace,
    pg_timeout: float,
    log_every: int,
) -> None:
    """Train from the checkpoint `saved` (or from scratch) to the end, writing RUN_DIR's files."""
    epochs_done = saved["epochs_done"] if saved else 0
    device = choose_device(place.local_rank)
    threads = configure_cpu_threads() if device.type == "cpu" else None
    torch.manual_seed(settings.seed)  # the same initial weights on every worker
    recipe = RECIPES[settings.recipe]
    images = torch.from_numpy(split.images).to(device)
    normalization = Normalization.measured_on(images) if recipe.normalize else Normalization.unit_scale_only()
    train_data = TrainingData(images, torch.from_numpy(split.labels).to(device), normalization, recipe.augment)
    log.info(
        "worker %d of %d (restart %d) on %s%s: %d training images, %s recipe, batch %d per worker, lr %g",
        place.rank, place.world_size, place.restart_count, device, f" with {threads} threads" if threads else "",
        len(split.labels), settings.recipe, settings.batch_size, settings.lr,
    )  # fmt: skip

    if place.launched_by_torchrun:
        # DistributedDataParallel's constructor imports torch._dynamo: 3 s of CPU on a small
        # machine. Pay it here, before joining the group, so that it never counts against the
        # short process-group timeout while a peer waits for us.
        importlib.import_module("torch._dynamo")
    join_process_group(place, device, pg_timeout)
    lowest, highest = smallest_and_largest(epochs_done, device)
    if lowest != highest:
        raise cli.JobError(f"workers read different checkpoints ({lowest} and {highest} epochs done); restart the job")
    if place.is_leader:
        checkpoint.remove_stale_temporary_files(run_dir)
        checkpoint.append_history(run_dir, {
            "event": "start", "epochs_done": epochs_done, "epochs": settings.epochs,
            "world_size": place.world_size, "restart_count": place.restart_count,
        })  # fmt: skip
    if saved:
        log.info("resuming from %s: %d of %d epochs done", run_dir / checkpoint.CHECKPOINT_NAME, epochs_done, settings.epochs)
    else:
        log.info("no checkpoint in %s: starting at epoch 1 of %d", run_dir, settings.epochs)

    plain_model = WorkshopCNN(num_classes=len(split.class_names)).to(device)
    if saved:
        plain_model.load_state_dict(saved["model"])
    model = plain_model
    if place.launched_by_torchrun:
        model = DistributedDataParallel(plain_model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = build_optimizer(model, settings)
    if saved:
        optimizer.load_state_dict(saved["optimizer"])

    for epoch in range(epochs_done, settings.epochs):
        result = train_one_epoch(model, optimizer, train_data, epoch, settings, place, log_every)
        if place.is_leader:
            _save_checkpoint(run_dir, plain_model, optimizer, settings, normalization, epochs_done=epoch + 1)
            checkpoint.append_history(run_dir, {
                "event": "epoch", "epoch": epoch + 1, "loss": round(result.loss, 5),
                "train_accuracy": round(result.accuracy, 5), "images_per_second": round(result.images_per_second, 1),
                "seconds": round(result.seconds, 3), "world_size": place.world_size,
            })  # fmt: skip
            log.info(
                "epoch %d/%d done: loss %.4f, train accuracy %.2f%%, %.0f images/s, %.1f s; checkpoint saved",
                epoch + 1, settings.epochs, result.loss, 100 * result.accuracy, result.images_per_second, result.seconds,
            )  # fmt: skip

    if place.is_leader:
        _save_model(run_dir, plain_model, settings, normalization, split, data_dir)
        checkpoint.append_history(run_dir, {"event": "finished", "epochs": settings.epochs})
        log.info("training finished: model written to %s", run_dir / checkpoint.MODEL_NAME)
    # If rank 0 dies writing model.pt, the others must fail too, so that torchrun restarts the
    # whole group (which then only writes model.pt) instead of waiting at its exit barrier.
    wait_for_all_workers()


if __name__ == "__main__":
    # No SIGTERM handler here: torchrun stops workers with SIGTERM and must not wait for one
    # blocked in a collective; checkpoint.save_atomically cleans up after itself otherwise.
    cli.run(main, "jobs.train", clean_up_on_sigterm=False,
            skip_interpreter_teardown=WorkerPlace.from_environment().launched_by_torchrun)  # fmt: skip
