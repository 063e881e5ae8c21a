"""A small text classifier trained with elastic_training: token sequences it generates itself, a bag of
embeddings, DistributedDataParallel on every worker.

    elastic-training local --module examples.text_classifier.train -- --steps 300
    torchrun --nproc_per_node=2 -m examples.text_classifier.train --steps 300

The data: sequences of 24 tokens from a vocabulary of 64, labelled by which of the tokens 5 and 9 occurs
more often (a tie counts for 5); every worker draws its own batches from a seed of (step, rank), so a
resumed run sees the batches the uninterrupted one would have. The library gives it the rest: resume from
the newest verified checkpoint, checkpoints every --checkpoint-every-seconds and on SIGTERM at a step all
workers agree on, progress lines in the run's history, a stop on a non-finite loss, model.pt at the end.
examples/text_classifier/evaluate.py measures it and writes metrics.json for the gate.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn.parallel import DistributedDataParallel

import elastic_training

VOCABULARY, LENGTH, CLASSES = 64, 24, 2


class BagOfTokens(torch.nn.Module):
    def __init__(self, dimensions: int = 16):
        super().__init__()
        self.embed = torch.nn.EmbeddingBag(VOCABULARY, dimensions, mode="sum")
        self.classify = torch.nn.Linear(dimensions, CLASSES)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.classify(self.embed(tokens))


def batch(seed: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`size` sequences and their labels, the same for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCABULARY, (size, LENGTH), generator=generator)
    labels = ((tokens == 9).sum(dim=1) > (tokens == 5).sum(dim=1)).long()
    return tokens, labels


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--checkpoint-every-seconds", type=float, default=30.0)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step, to watch it (default: 0)")
    args = parser.parse_args()

    run = elastic_training.Run(checkpoint_every_seconds=args.checkpoint_every_seconds, progress_every_seconds=1.0)
    torch.manual_seed(0)  # the same initial weights on every worker
    model = DistributedDataParallel(BagOfTokens()) if run.world_size > 1 else BagOfTokens()
    plain = getattr(model, "module", model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    state = run.resume()
    start = 0
    if state:
        plain.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]

    for step in range(start, args.steps):
        tokens, labels = batch(step * run.world_size + run.rank, args.batch_size)
        loss = torch.nn.functional.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(args.step_seconds)
        run.check_loss(loss, step)
        run.log(step + 1, loss=loss.item())
        run.step_done(step + 1, lambda: {"model": plain.state_dict(), "optimizer": optimizer.state_dict()})
    run.finish({"model": plain.state_dict(), "steps": args.steps})


if __name__ == "__main__":
    main()
