"""Training images/s of jobs.training.train's loop next to a plain reimplementation of the workshop's
loop, on the same generated data, model and machine, in one run.

    .venv/bin/python benchmarks/train_throughput.py [--images-per-class 128] [--epochs 2] [--workers N]

- jobs.training.train: the data set is one in-memory uint8 tensor; each step indexes a batch and
  augments / normalises it with a few tensor operations (train_one_epoch, measured as is).
- workshop: float32 TensorDataset of pixels / 255, DataLoader(shuffle, num_workers, pin_memory
  on GPU), SGD, `loss.item()` every step, as in the workshop's cifar10-model-train.py.

Single process (no DDP), so only the input pipeline and the step differ. A second table
times each input pipeline alone (no model): what it could feed a faster accelerator. Each loop runs
`--epochs` timed epochs after a warm-up epoch, interleaved (so a change in machine load
hits every loop alike); the median and best epoch are reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.data import cifar as data
from jobs.data import sampling  # noqa: E402
from jobs.training.distributed import WorkerPlace  # noqa: E402
from jobs.training.loop import TrainingData, train_one_epoch  # noqa: E402
from jobs.training.model import WorkshopCNN  # noqa: E402
from jobs.training.recipes import RECIPES, RunSettings, build_optimizer  # noqa: E402
from jobs.training.runtime import choose_device, configure_cpu_threads  # noqa: E402
from jobs.data.transforms import Normalization, random_flip_and_crop  # noqa: E402


def jobs_train_epoch(split: data.CifarSplit, recipe: str, batch_size: int, device: torch.device, epoch: int):
    """One epoch of jobs.training.train's own loop; returns (images, seconds)."""
    settings = RunSettings(recipe, epochs=100, batch_size=batch_size, lr=RECIPES[recipe].default_lr, seed=0)
    images = torch.from_numpy(split.images).to(device)
    normalization = Normalization.measured_on(images) if RECIPES[recipe].normalize else Normalization.unit_scale_only()
    train_data = TrainingData(images, torch.from_numpy(split.labels).to(device), normalization, RECIPES[recipe].augment)
    model = WorkshopCNN().to(device)
    optimizer = build_optimizer(model, settings)
    train_one_epoch(model, optimizer, train_data, 0, settings, WorkerPlace.alone(), log_every=0)  # warm-up
    result = train_one_epoch(model, optimizer, train_data, epoch, settings, WorkerPlace.alone(), log_every=0)
    return result.images, result.seconds


def workshop_epoch(split: data.CifarSplit, batch_size: int, workers: int, device: torch.device):
    """One epoch of the workshop's loop (reimplemented); returns (images, seconds)."""
    dataset = TensorDataset(torch.from_numpy(split.images).float() / 255, torch.from_numpy(split.labels))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                        pin_memory=device.type == "cuda")  # fmt: skip
    model = WorkshopCNN().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=1e-4)

    def one_pass() -> tuple[int, float]:
        model.train()
        seen, running_loss = 0, 0.0
        started = time.perf_counter()
        for images, labels in loader:  # workers start here, every epoch, as in the workshop
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            seen += len(labels)
        return seen, time.perf_counter() - started

    one_pass()  # warm-up
    return one_pass()


def input_pipeline_rates(
    split: data.CifarSplit, batch_size: int, workers: int, device: torch.device
) -> dict[str, float]:
    """images/s of each input pipeline alone (no model): what the data path could feed."""
    settings = RunSettings("improved", epochs=1, batch_size=batch_size, lr=0.05, seed=0)
    images = torch.from_numpy(split.images).to(device)
    normalization = Normalization.measured_on(images)
    generator = torch.Generator(device=device).manual_seed(0)
    started, seen = time.perf_counter(), 0
    for epoch in range(3):
        for indices in sampling.epoch_order(len(images), settings.seed, epoch).to(device).split(batch_size):
            batch = normalization.apply(random_flip_and_crop(images[indices], generator))
            seen += batch.shape[0]
    ours = seen / (time.perf_counter() - started)

    dataset = TensorDataset(torch.from_numpy(split.images).float() / 255, torch.from_numpy(split.labels))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers)
    started, seen = time.perf_counter(), 0
    for _ in range(3):
        for batch, _ in loader:
            seen += batch.shape[0]
    theirs = seen / (time.perf_counter() - started)
    return {"jobs.training.train (index + flip + crop + normalise, in memory)": ours,
            f"workshop (DataLoader, {workers} workers, no augmentation)": theirs}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images-per-class", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per loop (median reported)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--workers", type=int, default=len(os.sched_getaffinity(0)), help="DataLoader workers (workshop loop)"
    )
    args = parser.parse_args()

    device = choose_device()
    threads = configure_cpu_threads() if device.type == "cpu" else None
    with tempfile.TemporaryDirectory() as scratch:
        data.write_synthetic(Path(scratch) / data.FOLDER_NAME, args.images_per_class)
        split = data.load_split(Path(scratch) / data.FOLDER_NAME, "train")

    loops = {
        "jobs.training.train, improved recipe (normalise + flip + crop)":
            lambda epoch: jobs_train_epoch(split, "improved", args.batch_size, device, epoch),
        "jobs.training.train, workshop recipe (pixels / 255 only)":
            lambda epoch: jobs_train_epoch(split, "workshop", args.batch_size, device, epoch),
        f"workshop loop (TensorDataset + DataLoader, {args.workers} workers)":
            lambda epoch: workshop_epoch(split, args.batch_size, args.workers, device),
    }  # fmt: skip
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for epoch in range(1, args.epochs + 1):
        for name, run_epoch in loops.items():  # interleaved, so drifting machine load hits all alike
            torch.manual_seed(epoch)
            images, seconds = run_epoch(epoch)
            rates[name].append(images / seconds)

    where = f"{device}" + (f", {threads} threads" if threads else "")
    print(f"\n{len(split.labels)} generated CIFAR-format images, batch {args.batch_size}, {where}, "
          f"torch {torch.__version__}, {args.epochs} timed epochs per loop")  # fmt: skip
    width = max(map(len, rates))
    baseline = statistics.median(rates[list(loops)[-1]])
    print(f"  {'loop':<{width}}  {'median':>8}  {'best':>8}  images/s   (median vs the workshop loop)")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:<{width}}  {median:8.1f}  {max(values):8.1f}  images/s   ({median / baseline:.2f}x)")
    print("\ninput pipeline alone (no model), 3 epochs:")
    for name, rate in input_pipeline_rates(split, args.batch_size, args.workers, device).items():
        print(f"  {name:<{width}}  {rate:8.0f}  images/s")


if __name__ == "__main__":
    main()
