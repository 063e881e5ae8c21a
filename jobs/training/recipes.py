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


# The improved recipe's default_lr is for this many images per worker step.
REFERENCE_BATCH_SIZE = 128
# Linear scaling stops here: the rule is shown to hold up to global batches of 8k on ImageNet
# (Goyal et al. 2017, "Accurate, Large Minibatch SGD", section 5); beyond, a larger rate diverges.
MAX_SCALED_BATCH_SIZE = 8192


def default_lr(recipe: str, batch_size: int) -> float:
    """The recipe's peak rate for `batch_size` images per worker step. Improved recipe: scaled
    linearly with the batch (the linear scaling rule, Goyal et al. 2017: a k-times larger batch
    takes a k-times larger step, with the gradual warm-up `learning_rate` already has), so a GPU's
    larger batch trains as far per epoch as 128 does. Only upwards: a batch under 128 keeps the rate
    it always had (scaled down, the small batches of laptops and tests stopped learning: a batch of 20
    took 0.008 and scored at chance). The workshop recipe keeps the workshop's rate."""
    chosen = RECIPES[recipe]
    if not chosen.warmup_and_cosine:
        return chosen.default_lr
    scaled = min(max(batch_size, REFERENCE_BATCH_SIZE), MAX_SCALED_BATCH_SIZE)
    return chosen.default_lr * scaled / REFERENCE_BATCH_SIZE


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
