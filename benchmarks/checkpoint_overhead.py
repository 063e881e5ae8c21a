"""What checkpoints by time cost the training loop: steps/s with and without them, in the same workers.

    .venv/bin/python benchmarks/checkpoint_overhead.py [--workers 3] [--epochs 24] [--images-per-class 100]

Starts `torchrun --standalone --nproc_per_node=WORKERS` on this file; every worker builds what
jobs.training.train builds (gloo group, DistributedDataParallel workshop CNN, SGD) and trains epoch after
epoch with jobs.training.loop.train_one_epoch, each epoch under one of the policies below in turn (A B C C
B A ...), so drifting machine load hits all of them alike:

  epoch checkpoints only   no work between steps: jobs.training.train with --checkpoint-every-seconds 0
                           --no-save-on-sigterm, i.e. the loop as it was before
  every 30 s (default)     the per-step vote (an async all-reduce on the CPU control group) and a
                           checkpoint by rank 0 whenever 30 s have passed
  every 3 s                the same with ten times as many saves: the interval benchmarks/preemption.py
                           uses at its time scale of 0.1

A policy's checkpoint clock runs on through the other policies' epochs, so it saves at least as
often as its interval says: if anything, the cost shown is too high. It prints steps/s per policy
(median over its epochs) and relative to the first. benchmarks/preemption.py runs it too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

POLICIES = {"epoch checkpoints only": None, "every 30 s (default)": 30.0, "every 3 s": 3.0}


def worker(args) -> None:
    """One torchrun worker: alternate the policies epoch by epoch; rank 0 writes the timings."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from jobs.data import cifar as data
    from jobs.training.distributed import WorkerPlace, join_process_group
    from jobs.training.loop import TrainingData, train_one_epoch
    from jobs.training.model import WorkshopCNN
    from jobs.training.progress import CheckpointClock
    from jobs.training.recipes import RECIPES, RunSettings, build_optimizer
    from jobs.elastic.step_boundary import StepBoundary
    from jobs.elastic.stopping import StopSignal
    from jobs.data.transforms import Normalization

    place = WorkerPlace.from_environment()
    device = torch.device("cpu")
    split = data.load_split(args.data, "train")
    settings = RunSettings("improved", epochs=args.epochs, batch_size=args.batch_size, lr=0.05, seed=0)
    images = torch.from_numpy(split.images)
    normalization = Normalization.measured_on(images)
    train_data = TrainingData(images, torch.from_numpy(split.labels), normalization, RECIPES["improved"].augment)
    torch.manual_seed(0)
    join_process_group(place, device, 60)
    plain = WorkshopCNN()
    model = DistributedDataParallel(plain)
    optimizer = build_optimizer(model, settings)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)

    from jobs.training.progress import save_checkpoint

    def save(progress):
        save_checkpoint(run_dir, plain, optimizer, settings, normalization, len(split.labels), progress)

    names = list(POLICIES)
    order = [
        names[i % len(names)] if (i // len(names)) % 2 == 0 else names[-1 - i % len(names)] for i in range(args.epochs)
    ]
    boundaries = {name: StepBoundary(place, run_dir, save, CheckpointClock(interval), StopSignal())
                  for name, interval in POLICIES.items() if interval is not None}  # fmt: skip
    timings = []
    for epoch, name in enumerate(order):
        boundary = boundaries.get(name)
        started = time.perf_counter()
        train_one_epoch(model, optimizer, train_data, epoch, settings, place, log_every=0,
                        after_step=boundary.after_step if boundary else None)  # fmt: skip
        if boundary:
            boundary.finish()
        steps = -(-len(split.labels) // (place.world_size * args.batch_size))
        timings.append({"policy": name, "epoch": epoch, "steps_per_second": steps / (time.perf_counter() - started)})
    if place.is_leader:
        Path(args.out).write_text(json.dumps(timings))


def measure(workers: int, epochs: int, images_per_class: int, batch_size: int) -> list[dict]:
    """Run the workers; one {"policy", "epoch", "steps_per_second"} per epoch."""
    from jobs.data import cifar as data
    from tests.jobs.torchrun_harness import agent_environment

    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        data.write_synthetic(base / data.FOLDER_NAME, images_per_class)
        out = base / "timings.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={workers}",
                   str(Path(__file__).resolve()), "--worker", "--data", str(base / data.FOLDER_NAME), "--run-dir",
                   str(base / "run"), "--out", str(out), "--epochs", str(epochs + len(POLICIES)), "--batch-size", str(batch_size)]  # fmt: skip
        subprocess.run(command, check=True, cwd=ROOT, env=agent_environment(), stdout=subprocess.DEVNULL, timeout=1800)
        return json.loads(out.read_text())


def report(timings: list[dict]) -> None:
    """Steps/s per policy, and its ratio to epoch checkpoints only within each block of consecutive
    epochs that holds every policy once (so that a change in machine load cancels out)."""
    blocks: dict[int, dict[str, float]] = {}
    for timing in timings:
        blocks.setdefault(timing["epoch"] // len(POLICIES), {})[timing["policy"]] = timing["steps_per_second"]
    complete = [
        block for index, block in blocks.items() if index > 0 and len(block) == len(POLICIES)
    ]  # block 0: warm-up
    for name in POLICIES:
        values = [block[name] for block in complete]
        ratios = sorted(block[name] / block["epoch checkpoints only"] for block in complete)
        print(f"  {name:<24} {statistics.median(values):7.3f} steps/s   {statistics.median(ratios):.3f} x "
              f"(per block: {ratios[0]:.3f}..{ratios[-1]:.3f}, {len(ratios)} blocks)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument(
        "--epochs", type=int, default=24, help="timed epochs, a third per policy (after a block of warm-up)"
    )
    parser.add_argument("--images-per-class", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    if args.worker:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        worker(args)
        return
    print(
        f"{args.workers} workers, {args.images_per_class * 10} images, batch {args.batch_size}, {args.epochs} timed epochs"
    )
    report(measure(args.workers, args.epochs, args.images_per_class, args.batch_size))


if __name__ == "__main__":
    main()
