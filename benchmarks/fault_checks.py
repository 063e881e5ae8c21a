"""What the fault checks of issue 32 cost, each measured beside the same work without it, in one run.

    .venv/bin/python benchmarks/fault_checks.py [--images-per-class 5000] [--epochs 3] [--skip-data]

1. Training steps/s with the finiteness check of the loss (jobs.training.loop: one read of the running loss
   sum per --log-every steps, 50 by default) against the loop with the check replaced by nothing
   (before), and with a check every step (the worst case), epochs interleaved.
2. One checkpoint save and load with the content SHA-256 (jobs.training.checkpoint) against without.
3. The data check on a CIFAR-10-sized folder (5000 images per class: 184 MB): jobs.data.prepare's recheck
   of every file's SHA-256 (MB/s), and jobs.training.train's load of the training split with its
   in-read check against without.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.training import checkpoint
from jobs.data import cifar as data
from jobs.data import data_record
from jobs.training import loop  # noqa: E402
from jobs.training.distributed import WorkerPlace  # noqa: E402
from jobs.training.loop import TrainingData, train_one_epoch  # noqa: E402
from jobs.training.model import WorkshopCNN  # noqa: E402
from jobs.training.recipes import RunSettings, build_optimizer  # noqa: E402
from jobs.training.runtime import choose_device, configure_cpu_threads  # noqa: E402
from jobs.data.transforms import Normalization  # noqa: E402

CHECK = loop.check_finite_loss


def training_steps_per_second(split, device, epochs: int, batch_size: int) -> dict[str, list[float]]:
    settings = RunSettings("improved", epochs=100, batch_size=batch_size, lr=0.01, seed=0)
    images = torch.from_numpy(split.images).to(device)
    train_data = TrainingData(
        images, torch.from_numpy(split.labels).to(device), Normalization.measured_on(images), True
    )
    model = WorkshopCNN().to(device)
    optimizer = build_optimizer(model, settings)
    steps = -(-len(images) // batch_size)
    variants = {
        "no check (before)": (lambda value, where: None, 50),
        "check every 50 steps (default)": (CHECK, 50),
        "check every step (worst case)": (CHECK, 1),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    train_one_epoch(model, optimizer, train_data, 0, settings, WorkerPlace.alone(), log_every=50)  # warm-up
    for epoch in range(1, epochs + 1):
        for name, (check, log_every) in variants.items():  # interleaved: drifting load hits all alike
            loop.check_finite_loss = check
            result = train_one_epoch(model, optimizer, train_data, epoch, settings, WorkerPlace.alone(), log_every)
            rates[name].append(steps / result.seconds)
    loop.check_finite_loss = CHECK
    return rates


def checkpoint_seconds(folder: Path, repeats: int = 7) -> dict[str, float]:
    model = WorkshopCNN()
    optimizer = build_optimizer(model, RunSettings("improved", 1, 128, 0.05, 0))
    payload = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epochs_done": 1}
    path = folder / checkpoint.CHECKPOINT_NAME
    real_digest = checkpoint.content_digest
    timings: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, digest in (("without digest (before)", lambda payload: ""), ("with SHA-256", real_digest)):
            checkpoint.content_digest = digest
            started = time.perf_counter()
            checkpoint.save_atomically(payload, path)
            saved = time.perf_counter()
            checkpoint.load(path, "checkpoint") if digest is real_digest else torch.load(path, weights_only=True)
            timings.setdefault(f"save, {name}", []).append(saved - started)
            timings.setdefault(f"load, {name}", []).append(time.perf_counter() - saved)
    checkpoint.content_digest = real_digest
    print(f"checkpoint of the workshop CNN: {path.stat().st_size / 1e6:.2f} MB")
    return {name: statistics.median(values) for name, values in timings.items()}


def data_check(folder: Path, per_class: int) -> None:
    cifar = folder / data.FOLDER_NAME
    data.write_synthetic(cifar, per_class)
    record = data_record.write(cifar, {"synthetic_images_per_class": per_class, "seed": 0}, 0)
    megabytes = sum(entry["bytes"] for entry in record["files"].values()) / 1e6
    for attempt in range(3):
        started = time.perf_counter()
        assert data_record.differences(cifar, record["files"]) == []
        seconds = time.perf_counter() - started
        print(f"prepare's recheck of all {len(record['files'])} files: {megabytes:.0f} MB in {seconds:.3f} s "
              f"= {megabytes / seconds:.0f} MB/s (page cache warm, run {attempt + 1})")  # fmt: skip
    single = data_record.sha256_of_file(cifar / "data_batch_1")
    started = time.perf_counter()
    data_record.sha256_of_file(cifar / "data_batch_1")
    one = time.perf_counter() - started
    size = (cifar / "data_batch_1").stat().st_size / 1e6
    print(f"one file in one thread: {size:.0f} MB in {one:.3f} s = {size / one:.0f} MB/s ({single[:8]}...)")
    for _ in range(2):
        for name, recorded in (("without check (before)", None), ("with the in-read SHA-256 check", record)):
            started = time.perf_counter()
            data.load_split(cifar, "train", recorded)
            print(f"train's load of the training split, {name}: {time.perf_counter() - started:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images-per-class", type=int, default=5000)
    parser.add_argument("--train-images-per-class", type=int, default=256, help="for the steps/s part")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--skip-data", action="store_true")
    parser.add_argument("--skip-training", action="store_true", help="only the checkpoint and data parts")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the loop's progress lines

    device = choose_device()
    threads = configure_cpu_threads() if device.type == "cpu" else None
    print(f"device {device}" + (f", {threads} threads" if threads else "") + f", torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as scratch:
        if not args.skip_training:
            training_part(Path(scratch), args, device)
        for name, seconds in checkpoint_seconds(Path(scratch)).items():
            print(f"checkpoint {name}: {1000 * seconds:.1f} ms (median)")
        if not args.skip_data:
            data_check(Path(scratch) / "big", args.images_per_class)


def training_part(scratch: Path, args, device) -> None:
    data.write_synthetic(scratch / "small" / data.FOLDER_NAME, args.train_images_per_class)
    split = data.load_split(scratch / "small" / data.FOLDER_NAME, "train")
    for name, values in training_steps_per_second(split, device, args.epochs, args.batch_size).items():
        print(f"steps/s, {name}: median {statistics.median(values):.2f}, best {max(values):.2f} "
              f"({', '.join(f'{value:.2f}' for value in values)})")  # fmt: skip


if __name__ == "__main__":
    main()
