"""One epoch of training: the loop benchmarks/train_throughput.py measures.

Each step takes this worker's share of the next W x B images of the epoch's order
(jobs.data.sampling), augments and normalises them as one batch, and takes an optimizer step; the
caller's `after_step` runs between steps (checkpoints by time, stopping on SIGTERM).

A non-finite loss ends the run (NonFiniteLoss, exit 3) before anything is saved from it. The check
reads the running loss sum once per --log-every steps on every worker, not every step: a NaN or
infinite loss in any step since the epoch began makes that sum non-finite, so nothing is missed,
and a GPU is not stalled each step. The caller checks the sums again before every checkpoint.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from jobs import cli
from jobs.data import sampling
from jobs.training.distributed import WorkerPlace, sum_over_workers
from jobs.training.progress import Progress, time_left
from jobs.training.recipes import RunSettings, learning_rate
from jobs.training.runtime import Precision
from jobs.training.sample_trace import SampleTrace
from jobs.data.transforms import Normalization, random_flip_and_crop

log = logging.getLogger("jobs.training.train")


class NonFiniteLoss(cli.RunCannotContinue):
    """Training diverged: every later step and checkpoint would carry NaN weights."""


def check_finite_loss(value: float | torch.Tensor, where: str) -> None:
    """`value` a number or a one-element tensor (read here: on a GPU, that read waits for the device)."""
    value = float(value)
    if not math.isfinite(value):
        raise NonFiniteLoss(
            f"the training loss is {value} at {where}: training diverged, so no checkpoint or model is written "
            "from here on (the last checkpoint holds the last finite state); lower --lr or check the data"
        )


def check_finite_weights(model: nn.Module) -> None:
    """Once, before model.pt: a run resumed with every epoch done trains no step that would show it."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise NonFiniteLoss(
                f"the weights hold non-finite values ({name} holds non-finite values): "
                "model.pt is not written; the run's checkpoint came from a diverged run"
            )


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


def augmentation_seed(settings: RunSettings, epoch: int, share_start: int) -> int:
    """Each share of each step draws its flips and crops from its own seed, so a run resumed
    mid-epoch at the same world size augments exactly as the uninterrupted run did."""
    return ((settings.seed * 100_003 + epoch) * 1_000_003 + share_start) % 2**63


StepHook = Callable[[int, int, Callable[[], torch.Tensor]], None]
FP32 = Precision("fp32", channels_last=False)


def train_one_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_data: TrainingData,
    epoch: int,
    settings: RunSettings,
    place: WorkerPlace,
    log_every: int = 50,
    start: Progress | None = None,
    after_step: StepHook | None = None,
    trace: SampleTrace | None = None,
    precision: Precision = FP32,
    after_first_step: Callable[[], None] | None = None,
) -> EpochResult:
    """Train epoch `epoch` from `start` (its position and the sums before it; rank 0 adds those
    in) to its end. `after_step(epoch, position, sums)` runs between steps (jobs.elastic.step_boundary).
    `precision`: the forward pass under its autocast, the batch in its memory layout (the model
    must be in the same one: the caller converts it). `after_first_step` runs once, after this
    call's first step (train.py times the worker's start with it)."""
    device = train_data.images.device
    num_images = len(train_data.images)
    order = sampling.epoch_order(num_images, settings.seed, epoch).to(device)
    augmentation_rng = torch.Generator(device=device)
    carried = start if start is not None and place.is_leader else Progress(epoch)
    position = start.position if start is not None else 0
    # Running sums stay on the device: reading them every step would stall a GPU.
    loss_sum = torch.full((), carried.loss_sum, dtype=torch.float64, device=device)
    correct = torch.full((), carried.correct, dtype=torch.int64, device=device)
    seen = carried.seen
    total_steps = sampling.steps_in_epoch(0, num_images, place.world_size, settings.batch_size)
    images_per_full_step = place.world_size * settings.batch_size
    model.train()
    started = interval_start = time.perf_counter()
    images_in_interval = 0
    while position < num_images:
        step = sampling.next_step(position, num_images, place.world_size, settings.batch_size, place.rank)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(settings, epoch + position / num_images)
        # This worker's part of the step's mean loss: 1 for a full step. A worker left without
        # images (fewer left than workers) takes the step on one image with weight 0.
        indices = order[step.share_start : step.share_stop]
        weight = step.share_size * place.world_size / step.size
        if step.share_size == 0:
            indices = order[step.start : step.start + 1]
        images = train_data.images[indices]
        labels = train_data.labels[indices]
        if train_data.augment:
            augmentation_rng.manual_seed(augmentation_seed(settings, epoch, step.share_start))
            images = random_flip_and_crop(images, augmentation_rng)
        batch = train_data.normalization.apply(images)
        if precision.channels_last:
            batch = batch.contiguous(memory_format=torch.channels_last)
        with precision.autocast(device):
            outputs = model(batch)
            loss = F.cross_entropy(outputs, labels)  # autocast computes it in float32
        optimizer.zero_grad(set_to_none=True)
        (loss * weight if weight != 1 else loss).backward()
        optimizer.step()

        if step.share_size:
            loss_sum += loss.detach() * step.share_size
            correct += (outputs.detach().argmax(dim=1) == labels).sum()
            seen += step.share_size
        if trace is not None:
            trace.record(epoch, step, indices[: step.share_size])
        if after_first_step is not None:
            after_first_step()
            after_first_step = None
        position = step.stop
        images_in_interval += step.size
        step_number = min(-(-position // images_per_full_step), total_steps)
        if log_every and (step_number % log_every == 0 or position == num_images):
            check_finite_loss(loss_sum, f"epoch {epoch + 1} step {step_number}/{total_steps}")
            if place.is_leader:
                now = time.perf_counter()
                rate = images_in_interval / (now - interval_start)
                images_left = num_images - position + (settings.epochs - epoch - 1) * num_images
                log.info(
                    "epoch %d/%d step %d/%d loss %.4f lr %.5f %.0f images/s, %s",
                    epoch + 1, settings.epochs, step_number, total_steps, loss.item(),
                    optimizer.param_groups[0]["lr"], rate, time_left(images_left, rate),
                )  # fmt: skip
                interval_start, images_in_interval = now, 0
        if after_step is not None and position < num_images:
            after_step(epoch, position, lambda: torch.stack([loss_sum, correct.to(torch.float64),
                                                             torch.tensor(float(seen), dtype=torch.float64, device=device)]))  # fmt: skip

    local = torch.stack(
        [loss_sum, correct.to(torch.float64), torch.tensor(float(seen), dtype=torch.float64, device=device)]
    )
    loss_total, correct_total, seen_total = sum_over_workers(local).tolist()
    return EpochResult(
        loss_total / seen_total, correct_total / seen_total, int(seen_total), time.perf_counter() - started
    )
