"""jobs.training.model: the workshop's network, unchanged."""

from __future__ import annotations

import torch
from torch import nn

from jobs.training.model import WorkshopCNN


def test_same_size_as_the_workshop_network():
    model = WorkshopCNN()
    assert sum(parameter.numel() for parameter in model.parameters()) == 3_229_770
    convolutions = [layer for layer in model.modules() if isinstance(layer, nn.Conv2d)]
    assert [layer.out_channels for layer in convolutions] == [32, 64, 128, 128, 256, 256]
    assert sum(isinstance(layer, nn.BatchNorm2d) for layer in model.modules()) == 3


def test_maps_a_batch_of_images_to_ten_scores():
    assert WorkshopCNN()(torch.zeros(5, 3, 32, 32)).shape == (5, 10)
