"""Per-batch preprocessing on tensors: normalisation and training-time augmentation.

The data set stays in memory as one uint8 tensor (150 MB for CIFAR-10, on the GPU when there
is one). Each step indexes a batch out of it and transforms the whole batch with a handful of
tensor operations, instead of a DataLoader calling Python code once per image.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Normalization:
    """Per-channel mean and standard deviation of pixel values scaled to 0..1."""

    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    @classmethod
    def unit_scale_only(cls) -> Normalization:
        """The workshop's preprocessing: divide by 255, nothing else."""
        return cls((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))

    @classmethod
    def measured_on(cls, images: torch.Tensor) -> Normalization:
        """Exact statistics of a uint8 (N, 3, H, W) tensor, from a 256-bin histogram per
        channel: no float copy of the whole data set is ever made."""
        values = torch.arange(256, dtype=torch.float64) / 255
        means, stds = [], []
        for channel in range(images.shape[1]):
            counts = torch.bincount(images[:, channel].flatten(), minlength=256).to(torch.float64).cpu()
            mean = (counts * values).sum() / counts.sum()
            variance = (counts * (values - mean) ** 2).sum() / counts.sum()
            means.append(float(mean))
            stds.append(max(float(variance.sqrt()), 1e-6))
        (mean_r, mean_g, mean_b), (std_r, std_g, std_b) = means, stds  # (N, 3, H, W): three channels
        return cls((mean_r, mean_g, mean_b), (std_r, std_g, std_b))

    def apply(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, 3, H, W) -> float32, (x / 255 - mean) / std, as one multiply-add."""
        shift, scale = _shift_and_scale(self, images.device)
        return torch.addcmul(shift, images.to(torch.float32), scale)

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, saved: dict) -> Normalization:
        return cls(tuple(saved["mean"]), tuple(saved["std"]))


@functools.lru_cache(maxsize=16)
def _shift_and_scale(normalization: Normalization, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """-mean/std and 1/(255 std) as (1, C, 1, 1) tensors on `device`, made once per device: building
    them every step copied two small host lists to a GPU each step, and a copy from pageable host
    memory waits for the GPU to finish the work queued before it, so every step stalled the queue."""
    mean = torch.tensor(normalization.mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    std = torch.tensor(normalization.std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    return -mean / std, 1 / (255 * std)


def random_flip_and_crop(images: torch.Tensor, generator: torch.Generator, padding: int = 4) -> torch.Tensor:
    """The standard CIFAR augmentation for a whole batch: mirror each image left-right with
    probability 1/2, then cut a random HxW window out of the image zero-padded by `padding`
    pixels on every side (the same as torchvision's RandomHorizontalFlip + RandomCrop(32, padding=4)).
    Works on uint8 before normalisation, so zero padding is a black border as in torchvision."""
    batch, channels, height, width = images.shape
    device = images.device
    flip = torch.rand(batch, generator=generator, device=device) < 0.5
    images = torch.where(flip.view(-1, 1, 1, 1), images.flip(3), images)
    if padding == 0:
        return images
    padded = F.pad(images, (padding, padding, padding, padding))
    top = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=device)
    left = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=device)
    rows = (top.view(-1, 1) + torch.arange(height, device=device)).view(batch, 1, height, 1)
    cols = (left.view(-1, 1) + torch.arange(width, device=device)).view(batch, 1, 1, width)
    image_index = torch.arange(batch, device=device).view(-1, 1, 1, 1)
    channel_index = torch.arange(channels, device=device).view(1, -1, 1, 1)
    return padded[image_index, channel_index, rows, cols]
