"""Issue 40 on the CPU: --precision, the batch and learning rate a worker picks, the per-device
normalisation constants, and the time from a worker's start to its first step.

What needs a GPU (bf16 autocast's speed and accuracy, the early CUDA context) is measured by
benchmarks/gpu.py on a GPU machine (docs/gpu.md); here the same code paths run on the CPU."""

from __future__ import annotations

import time

import pytest
import torch
from conftest import assert_one_line_error, run_job

from jobs import cli
from jobs.data import transforms
from jobs.data.transforms import Normalization
from jobs.training import checkpoint, cuda_context, recipes, runtime, startup, train
from jobs.training.distributed import WorkerPlace
from jobs.training.loop import TrainingData, train_one_epoch
from jobs.training.model import WorkshopCNN
from infra.config import keys

CPU = torch.device("cpu")


def test_on_the_cpu_auto_and_fp32_are_fp32_and_gpu_arithmetic_is_refused_in_one_line():
    assert runtime.resolve_precision("auto", CPU) == runtime.Precision("fp32", channels_last=False)
    assert runtime.resolve_precision("fp32", CPU).name == "fp32"
    for name in ("tf32", "bf16"):
        with pytest.raises(cli.UsageError, match=f"--precision {name} needs a CUDA GPU .*use --precision auto or fp32"):
            runtime.resolve_precision(name, CPU)


def test_bf16_on_a_cpu_worker_is_refused_with_one_line_before_anything_is_written(tiny_cifar, tmp_path):
    result = run_job("jobs.training.train", "--data", str(tiny_cifar), "--run-dir", str(tmp_path / "run"),
                     "--precision", "bf16")  # fmt: skip
    assert_one_line_error(result, cli.EXIT_USAGE, "--precision bf16 needs a CUDA GPU", "use --precision auto or fp32")
    assert not (tmp_path / "run").exists()


def test_the_stack_key_offers_what_the_worker_accepts():
    assert keys.PRECISIONS == runtime.PRECISIONS


def test_the_improved_recipe_scales_its_rate_with_the_batch_and_the_workshop_recipe_does_not():
    assert recipes.default_lr("improved", 128) == pytest.approx(0.05)
    assert recipes.default_lr("improved", 1024) == pytest.approx(0.4)  # the GPU batch (runtime.GPU_BATCH_SIZE)
    assert recipes.default_lr("improved", 65_536) == recipes.default_lr("improved", recipes.MAX_SCALED_BATCH_SIZE)
    assert recipes.default_lr("workshop", 1024) == recipes.RECIPES["workshop"].default_lr
    assert recipes.default_lr("improved", 20) == pytest.approx(0.05)  # never scaled down: small batches learn as before


def test_a_cpu_worker_keeps_batch_128_and_rate_0_05_by_default(tiny_cifar, tmp_path):
    assert runtime.default_batch_size(CPU) == 128 and runtime.default_batch_size(torch.device("cuda", 0)) == 1024
    run_dir = tmp_path / "run"
    assert train.main(["--data", str(tiny_cifar), "--run-dir", str(run_dir), "--epochs", "1"]) == 0
    settings = checkpoint.load(run_dir / "model.pt", "model")["settings"]
    assert settings["batch_size"] == 128 and settings["lr"] == pytest.approx(0.05)


def test_normalisation_constants_are_made_once_per_device_and_give_the_same_values():
    """Building them each step copied two host lists to the GPU each step, which waits for the GPU."""
    normalization = Normalization((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))
    images = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
    first = normalization.apply(images)
    hits = transforms._shift_and_scale.cache_info().hits
    again = normalization.apply(images)
    assert transforms._shift_and_scale.cache_info().hits == hits + 1
    mean = torch.tensor(normalization.mean).view(1, 3, 1, 1)
    std = torch.tensor(normalization.std).view(1, 3, 1, 1)
    expected = (images.float() / 255 - mean) / std
    assert torch.allclose(first, expected, atol=1e-5) and torch.equal(first, again)


def test_the_loop_trains_under_autocast_in_channels_last(tiny_cifar):
    """The bf16 + channels_last path of train_one_epoch (a GPU's auto), run on the CPU's own autocast."""
    from jobs.data import cifar

    split = cifar.load_split(tiny_cifar, "train")
    images = torch.from_numpy(split.images)
    data = TrainingData(images, torch.from_numpy(split.labels), Normalization.measured_on(images), augment=True)
    settings = recipes.RunSettings("improved", epochs=2, batch_size=25, lr=0.05, seed=0)
    precision = runtime.Precision("bf16", channels_last=True)
    torch.manual_seed(0)
    model = WorkshopCNN().to(memory_format=torch.channels_last)
    optimizer = recipes.build_optimizer(model, settings)
    first_steps = []
    results = [train_one_epoch(model, optimizer, data, epoch, settings, WorkerPlace.alone(), log_every=0,
                               precision=precision, after_first_step=lambda: first_steps.append(1))
               for epoch in range(2)]  # fmt: skip
    assert first_steps == [1, 1]  # once per call
    assert all(torch.isfinite(torch.tensor(r.loss)) for r in results) and results[1].loss < results[0].loss
    assert model.layers[0].weight.dtype == torch.float32  # autocast keeps the weights in float32
    assert model.layers[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_the_worker_logs_how_long_it_took_to_its_first_step_phase_by_phase(tiny_cifar, tmp_path, capsys):
    assert train.main(["--data", str(tiny_cifar), "--run-dir", str(tmp_path / "run"), "--epochs", "1",
                       "--batch-size", "50"]) == 0  # fmt: skip
    # The log goes to stdout (jobs.cli.configure_logging), after its "HH:MM:SS [rank 0/1] " prefix.
    (line,) = [
        text.split("] ", 1)[1] for text in capsys.readouterr().out.splitlines() if "after the worker started" in text
    ]
    phases = [part.split()[0] for part in line.split(": ", 1)[1].split(" (")[0].split(", ")]
    assert phases == ["imports", "data", "waiting", "data", "process", "model", "first"], line
    seconds = float(line.split()[2])
    assert 0 < seconds < 600


def test_process_start_time_is_this_process_start():
    started = startup.process_start_time()
    assert started is not None and time.time() - 3600 < started <= time.time()
    clock = startup.StartupClock()
    assert clock.started <= time.time() and clock.phases[0][0] == "imports"


def test_the_early_cuda_context_gives_up_quietly_without_a_driver():
    outcome = cuda_context.start_in_background().result()
    if torch.cuda.is_available():  # a GPU machine: the driver made it
        assert outcome.startswith("CUDA context of device 0 made"), outcome
    else:
        assert outcome.startswith(("not made early (", "no CUDA device")), outcome
