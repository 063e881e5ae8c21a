"""How fast the CIFAR-10 job trains, as measured: images per second of one GPU, by GPU model, arithmetic
and batch per worker, with the time from a worker's start to its first step.

Only what was measured is here (docs/gpu.md, "Measured on an NVIDIA H200"; `python benchmarks/gpu.py`,
its results in benchmarks/results/): the pod path (the rendezvous store, one agent, one worker,
`jobs.training.train` on 50,000 images), images/s the median of epochs 2 to 6. A GPU, arithmetic or batch
without a row has no rate, and nothing is said about it: no rate is scaled from another card, batch or
precision. No CPU instance type has a row: the one CPU figure (docs/gpu.md, "On the CPU") is of a shared
2-core machine, not of an EC2 type.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MeasuredRate:
    images_per_second: float  # one GPU, steady (the median of epochs 2 to 6)
    first_step_seconds: float  # from the worker process's start to its first step
    source: str


_SESSION_1 = "benchmarks/results/h200-2026-11-28-session1.json"
_SESSION_2 = "benchmarks/results/h200-2026-11-28-session2.json"

# (GPU model as infra/aws/gpu_instances.py names it, arithmetic the worker runs, batch per worker). The
# arithmetic is what `--precision` resolves to (jobs/training/runtime.py resolve_precision): on the H200
# (compute capability 9.0) auto is bf16 with channels_last. Where a setting was measured in both sessions,
# the second's (cuDNN's algorithm search off, the stack's default; the first had it on).
MEASURED: dict[tuple[str, str, int], MeasuredRate] = {
    ("H200", "bf16", 1024): MeasuredRate(168_161, 7.77, f"{_SESSION_2}, auto-nobench"),
    ("H200", "bf16", 512): MeasuredRate(71_998, 10.56, f"{_SESSION_1}, auto-512"),
    ("H200", "tf32", 1024): MeasuredRate(92_220, 10.67, f"{_SESSION_1}, tf32"),
    ("H200", "fp32", 1024): MeasuredRate(38_272, 12.38, f"{_SESSION_1}, fp32"),
    ("H200", "fp32", 128): MeasuredRate(20_603, 10.82, f"{_SESSION_2}, fp32-128"),
}


def measured(gpu: str, arithmetic: str, batch: int) -> MeasuredRate | None:
    return MEASURED.get((gpu, arithmetic, batch))
