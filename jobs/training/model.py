"""The workshop's CIFAR-10 network (reference/workshop.md §7.2), layer for layer.

Three blocks of two 3x3 convolutions (32/64, 128/128, 256/256 channels) each followed by 2x2
max-pooling and batch normalisation, then 4096 -> 512 -> 10 fully connected: 3,229,770
parameters. Kept identical so accuracy and speed compare with the workshop's numbers.
"""

from __future__ import annotations

from torch import nn

ARCHITECTURE = "workshop-cnn"  # recorded in model.pt so evaluate can refuse other networks


def _conv(in_channels: int, out_channels: int) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)


class WorkshopCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.layers = nn.Sequential(
            _conv(3, 32), nn.ReLU(inplace=True),
            _conv(32, 64), nn.ReLU(inplace=True),
            nn.MaxPool2d(2), nn.BatchNorm2d(64),  # 64 x 16 x 16
            _conv(64, 128), nn.ReLU(inplace=True),
            _conv(128, 128), nn.ReLU(inplace=True),
            nn.MaxPool2d(2), nn.BatchNorm2d(128),  # 128 x 8 x 8
            _conv(128, 256), nn.ReLU(inplace=True),
            _conv(256, 256), nn.ReLU(inplace=True),
            nn.MaxPool2d(2), nn.BatchNorm2d(256),  # 256 x 4 x 4
            nn.Flatten(),
            nn.Linear(256 * 4 * 4, 512), nn.ReLU(inplace=True),
            nn.Linear(512, num_classes),
        )  # fmt: skip

    def forward(self, images):
        return self.layers(images)
