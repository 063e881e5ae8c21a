"""jobs.data.transforms: batched augmentation and normalisation on tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from jobs.data.transforms import Normalization, random_flip_and_crop


def images(count: int = 64) -> torch.Tensor:
    return torch.randint(0, 256, (count, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))


def test_every_output_is_a_window_of_the_padded_or_mirrored_image():
    batch = images()
    out = random_flip_and_crop(batch, torch.Generator().manual_seed(2), padding=4)
    assert out.shape == batch.shape and out.dtype == torch.uint8
    offsets, flips = set(), set()
    for original, augmented in zip(batch, out):
        matches = [
            (flipped, top, left)
            for flipped, source in ((False, original), (True, original.flip(2)))
            for top in range(9)
            for left in range(9)
            if torch.equal(F.pad(source, (4, 4, 4, 4))[:, top : top + 32, left : left + 32], augmented)
        ]
        assert matches, "augmented image is not a crop of the (mirrored) padded original"
        flips.add(matches[0][0])
        offsets.add(matches[0][1:])
    assert flips == {False, True}  # both happen
    assert len(offsets) > 20  # offsets vary per image, not per batch


def test_augmentation_is_reproducible_from_its_generator():
    batch = images()
    first = random_flip_and_crop(batch, torch.Generator().manual_seed(3))
    second = random_flip_and_crop(batch, torch.Generator().manual_seed(3))
    assert torch.equal(first, second)


def test_without_padding_only_flips():
    batch = images()
    out = random_flip_and_crop(batch, torch.Generator().manual_seed(4), padding=0)
    for original, augmented in zip(batch, out):
        assert torch.equal(augmented, original) or torch.equal(augmented, original.flip(2))


def test_measured_normalization_gives_zero_mean_unit_std_per_channel():
    batch = images(500)
    batch[:, 0] //= 2  # channels with different statistics
    normalization = Normalization.measured_on(batch)
    expected_mean = batch.double().div(255).mean(dim=(0, 2, 3))
    assert torch.allclose(torch.tensor(normalization.mean, dtype=torch.float64), expected_mean, atol=1e-9)
    normalized = normalization.apply(batch)
    assert normalized.dtype == torch.float32
    assert torch.allclose(normalized.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-4)
    assert torch.allclose(normalized.std(dim=(0, 2, 3), correction=0), torch.ones(3), atol=1e-4)


def test_workshop_preprocessing_is_divide_by_255():
    batch = images(4)
    assert torch.allclose(Normalization.unit_scale_only().apply(batch), batch.float() / 255)
    saved = Normalization.measured_on(batch).to_dict()
    assert Normalization.from_dict(saved).to_dict() == saved
