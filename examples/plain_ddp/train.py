"""A plain torchrun DDP script that knows nothing of elastic_training: it reads what torchrun gives every
worker (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT through init_process_group's env:// default),
writes where ELASTIC_TRAINING_RUN_DIR says, and resumes from its own checkpoint.

    torchrun --nproc_per_node=2 examples/plain_ddp/train.py --steps 200
    elastic-training local --script examples/plain_ddp/train.py -- --steps 200

It fits y = 3x - 1 + noise with a linear model on data it generates. Rank 0 saves a checkpoint every
--checkpoint-every steps (to a temporary file, renamed over the old one: a kill mid-write leaves the old
file); a restarted group loads it and goes on from that step. At the end rank 0 writes model.pt, which
tells the platform the run is done, and metrics.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step, to watch it (default: 0)")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # env:// : RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(os.environ.get("ELASTIC_TRAINING_RUN_DIR", "run"))
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "plain-checkpoint.pt"
    if (out / "model.pt").exists():
        print("model.pt exists: this run is finished", flush=True)
        return

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if saved.exists():
        state = torch.load(saved, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"rank {rank}: resuming at step {start}", flush=True)

    for step in range(start, args.steps):
        generator = torch.Generator().manual_seed(step * world + rank)  # each worker its own batch
        x = torch.randn(32, 1, generator=generator)
        y = 3 * x - 1 + 0.01 * torch.randn(32, 1, generator=generator)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(args.step_seconds)
        if rank == 0 and (step + 1) % args.checkpoint_every == 0:
            temporary = saved.with_suffix(".tmp")
            torch.save(
                {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1}, temporary
            )
            os.replace(temporary, saved)
            print(f"step {step + 1}: loss {loss.item():.5f}, checkpoint saved", flush=True)

    if rank == 0:
        weight, bias = model.module.weight.item(), model.module.bias.item()
        (out / "metrics.json").write_text(json.dumps({"weight": weight, "bias": bias, "loss": loss.item()}))
        torch.save(model.module.state_dict(), out / "model.pt")
        print(f"done: y = {weight:.3f} x + {bias:.3f}", flush=True)
    dist.barrier()


if __name__ == "__main__":
    main()
