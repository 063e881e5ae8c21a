"""The two training recipes, what defines a run, and the learning-rate schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


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


def build_optimizer(model: nn.Module, settings: RunSettings) -> torch.optim.SGD:
    recipe = RECIPES[settings.recipe]
    return torch.optim.SGD(
        model.parameters(),
        lr=settings.lr,
        momentum=recipe.momentum,
        nesterov=recipe.nesterov,
        weight_decay=recipe.weight_decay,
    )
