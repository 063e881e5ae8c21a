"""The CIFAR job on one GPU: images/s of the pod path and of the model alone, test accuracy per precision,
and the time from a worker's start to its first step. Prints a table; docs/gpu.md records its figures.

    python benchmarks/gpu.py [--images-per-class 5000] [--epochs 6] [--out DIR]

1. ceiling: the same CNN and optimizer on random uint8 images already on the device (no sampling,
   no augmentation, no DistributedDataParallel), at each precision and a few batches: what the chip
   gives this model. On a GPU, timed with a synchronize around the steps after warm-up steps, with
   cuDNN's algorithm search on (torch.backends.cudnn.benchmark).
2. pod path: generated data written by `python -m jobs.data.prepare --synthetic` (with its record, so
   the worker hashes it as in a pod), the rendezvous store (`python -m jobs.elastic.store_server`)
   and one agent (`python -m jobs.elastic.agent`, one node, one worker) training
   `jobs.training.train` for --epochs at each precision, then `python -m jobs.results.evaluate` on
   the generated test split. images/s are the workers' own epoch lines; the time to the first
   step is the worker's own line (from its process's start: jobs.training.startup) and, seen from
   outside, from the agent's start to that line.

On the CPU (no CUDA) it runs the same with fp32 only, and checks that --precision bf16 is refused
with one line: that is how it is tested here with tiny sizes before it spends GPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from elastic_training import run_directory  # noqa: E402
from jobs.data.transforms import Normalization  # noqa: E402
from jobs.elastic.rendezvous import BACKEND  # noqa: E402
from jobs.elastic.store_server import READY as STORE_READY  # noqa: E402
from jobs.training.model import WorkshopCNN  # noqa: E402
from jobs.training.recipes import RunSettings, build_optimizer, default_lr  # noqa: E402
from jobs.training.runtime import Precision, configure_precision, resolve_precision  # noqa: E402

EPOCH_LINE = re.compile(r"epoch (\d+)/(\d+) done: loss ([\d.]+), train accuracy ([\d.]+)%, (\d+) images/s, ([\d.]+) s")
FIRST_STEP_LINE = re.compile(r"first step ([\d.]+) s after the worker started: (.*)$")


# --- 1. the model alone -------------------------------------------------------------------------


def ceiling(device: torch.device, precision: Precision, batch_size: int, steps: int, warmup: int) -> float:
    """images/s of forward + backward + SGD step on batches already on the device."""
    configure_precision(precision, device, cudnn_benchmark=True)  # the fastest algorithms: this is the ceiling
    torch.manual_seed(0)
    model = WorkshopCNN().to(device)
    if precision.channels_last:
        model = model.to(memory_format=torch.channels_last)
    settings = RunSettings("improved", epochs=1, batch_size=batch_size, lr=default_lr("improved", batch_size), seed=0)
    optimizer = build_optimizer(model, settings)
    # Several batches, rotated, so the timing does not measure one batch held in cache (random, never zeros).
    generator = torch.Generator(device=device).manual_seed(0)
    images = torch.randint(0, 256, (4, batch_size, 3, 32, 32), dtype=torch.uint8, device=device, generator=generator)
    labels = torch.randint(0, 10, (4, batch_size), device=device, generator=generator)
    normalization = Normalization((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))

    def step(i: int) -> None:
        batch = normalization.apply(images[i % 4])
        if precision.channels_last:
            batch = batch.contiguous(memory_format=torch.channels_last)
        with precision.autocast(device):
            loss = F.cross_entropy(model(batch), labels[i % 4])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for i in range(warmup):
        step(i)
    synchronize(device)
    started = time.perf_counter()
    for i in range(steps):
        step(i)
    synchronize(device)
    return steps * batch_size / (time.perf_counter() - started)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ceiling_table(device: torch.device, batches: list[int], steps: int, warmup: int) -> list[dict]:
    variants = [("fp32", False)]
    if device.type == "cuda":
        variants += [("tf32", False), ("tf32", True), ("bf16", False), ("bf16", True)]
    rows = []
    for name, channels_last in variants:
        for batch_size in batches:
            rate = ceiling(device, Precision(name, channels_last), batch_size, steps, warmup)
            rows.append({"precision": name, "channels_last": channels_last, "batch": batch_size, "images_per_s": rate})
            print(
                f"  ceiling {name:5} {'channels_last' if channels_last else 'NCHW':13} batch {batch_size:5}: "
                f"{rate:10.0f} images/s",
                flush=True,
            )
    return rows


# --- 2. the pod path ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }


@dataclass
class PodRun:
    label: str
    train_args: list[str]
    returncode: int | None = None
    agent_seconds: float = 0.0
    agent_start_to_first_step: float | None = None
    worker_first_step: float | None = None
    first_step_phases: str = ""
    epochs: list[dict] = field(default_factory=list)
    test_accuracy: float | None = None
    settings_line: str = ""

    @property
    def steady_images_per_s(self) -> float | None:
        """Median over the epochs after the first (the first pays cuDNN's algorithm search)."""
        rates = [e["images_per_s"] for e in self.epochs[1:]] or [e["images_per_s"] for e in self.epochs]
        return statistics.median(rates) if rates else None


def start_store(log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = log_path.open("w")
    store = subprocess.Popen([sys.executable, "-m", "jobs.elastic.store_server", "--host", "127.0.0.1", "--port", str(port)],
                             stdout=log, stderr=subprocess.STDOUT, env=environment(), cwd=REPO_ROOT)  # fmt: skip
    deadline = time.monotonic() + 60
    while STORE_READY not in log_path.read_text():
        if store.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the rendezvous store did not start: {log_path.read_text()}")
        time.sleep(0.05)
    return store, f"127.0.0.1:{port}"


def run_pod(run: PodRun, data_dir: Path, work: Path, store_endpoint: str, epochs: int, timeout: float) -> PodRun:
    run_dir = work / f"run-{run.label}"
    command = [
        sys.executable, "-m", "jobs.elastic.agent", f"--rdzv_backend={BACKEND}", f"--rdzv_endpoint={store_endpoint}",
        f"--rdzv_id=gpu-bench-{uuid.uuid4().hex[:8]}", "--nnodes=1", "--nproc_per_node=1", "--max_restarts=0",
        "--local_addr=127.0.0.1", "-m", "jobs.training.train", "--data", str(data_dir), "--run-dir", str(run_dir),
        "--epochs", str(epochs), "--log-every", "1000000", *run.train_args,
    ]  # fmt: skip
    log_path = work / f"agent-{run.label}.log"
    started = time.monotonic()
    agent = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(),
                             cwd=REPO_ROOT)  # fmt: skip
    timer = threading.Timer(timeout, agent.kill)  # a hang becomes a failed row, never a stuck benchmark
    timer.start()
    with log_path.open("w") as log:
        for line in agent.stdout:
            log.write(line)
            if (match := FIRST_STEP_LINE.search(line)) and run.worker_first_step is None:
                run.agent_start_to_first_step = time.monotonic() - started
                run.worker_first_step, run.first_step_phases = float(match[1]), match[2].strip()
            elif match := EPOCH_LINE.search(line):
                run.epochs.append({"epoch": int(match[1]), "loss": float(match[3]), "train_accuracy": float(match[4]) / 100,
                                   "images_per_s": float(match[5]), "seconds": float(match[6])})  # fmt: skip
            elif "training images," in line and "recipe" in line:
                run.settings_line = line.split("] ", 1)[-1].strip()
    run.returncode = agent.wait()
    timer.cancel()
    run.agent_seconds = time.monotonic() - started
    if run.returncode == 0:
        run.test_accuracy = evaluate(data_dir, run_dir)
    return run


def evaluate(data_dir: Path, run_dir: Path) -> float:
    metrics = run_dir / "bench-metrics.json"
    subprocess.run([sys.executable, "-m", "jobs.results.evaluate", "--data", str(data_dir), "--model",
                    str(run_dir / run_directory.MODEL), "--metrics-out", str(metrics)], check=True, env=environment(),
                   cwd=REPO_ROOT, stdout=subprocess.DEVNULL)  # fmt: skip
    return json.loads(metrics.read_text())["accuracy"]


def refused_line(data_dir: Path, work: Path) -> str:
    """What `--precision bf16` prints on a machine without CUDA (run alone, not under torchrun)."""
    done = subprocess.run([sys.executable, "-m", "jobs.training.train", "--data", str(data_dir), "--run-dir",
                           str(work / "refused"), "--precision", "bf16"], capture_output=True, text=True,
                          env=environment(), cwd=REPO_ROOT, timeout=120)  # fmt: skip
    return f"exit {done.returncode}: {done.stderr.strip()}"


# --- the table ----------------------------------------------------------------------------------


def print_pod_table(runs: list[PodRun], epochs: int, images: int) -> None:
    print(f"\npod path: store + jobs.elastic.agent, 1 worker, {images} generated images, {epochs} epochs")
    print(
        f"  {'run':<34} {'images/s':>9} {'epoch 1':>9} {'test acc':>9} {'train acc':>9} "
        f"{'1st step':>9} {'agent->1st':>10} {'agent s':>8}"
    )
    for run in runs:
        rate = run.steady_images_per_s
        print(
            f"  {run.label:<34} {fmt(rate, '9.0f')} {fmt(run.epochs[0]['images_per_s'] if run.epochs else None, '9.0f')} "
            f"{fmt(100 * run.test_accuracy if run.test_accuracy is not None else None, '8.2f')}% "
            f"{fmt(100 * run.epochs[-1]['train_accuracy'] if run.epochs else None, '8.2f')}% "
            f"{fmt(run.worker_first_step, '8.2f')}s {fmt(run.agent_start_to_first_step, '9.2f')}s "
            f"{run.agent_seconds:7.1f}s" + (f"  FAILED (exit {run.returncode})" if run.returncode else "")
        )
    for run in runs:
        print(f"  {run.label}: {run.settings_line}")
        if run.first_step_phases:
            print(f"    first step phases: {run.first_step_phases}")


def fmt(value: float | None, spec: str) -> str:
    width = int(spec.split(".")[0])
    return f"{value:{spec}}" if value is not None else f"{'-':>{width}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--images-per-class",
        type=int,
        default=5000,
        help="generated training images per class (default: %(default)s, CIFAR-10's size)",
    )
    parser.add_argument("--epochs", type=int, default=6, help="epochs per pod-path run (default: %(default)s)")
    parser.add_argument(
        "--ceiling-batches", default="128,512,1024,2048", help="batches of the model-alone table (\"\": none)"
    )
    parser.add_argument("--ceiling-steps", type=int, default=60)
    parser.add_argument(
        "--runs",
        default="auto,tf32,fp32,fp32-128",
        help="pod-path runs, among: auto, bf16, tf32, fp32, "
        "fp32-128 (fp32 at batch 128, the run of before issue 40), auto-512, auto-2048, auto-cudnn-benchmark",
    )
    parser.add_argument("--run-timeout", type=float, default=240.0, help="seconds before a pod-path run is killed")
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for results.json and the agents' logs (agents.log)"
    )
    args = parser.parse_args()

    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"{card}; torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}; "
        f"auto resolves to {resolve_precision('auto', device).name}",
        flush=True,
    )
    results: dict = {"card": card, "torch": torch.__version__, "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version()}  # fmt: skip

    print("\nceiling: the model alone on batches already on the device", flush=True)
    batches = [int(b) for b in args.ceiling_batches.split(",") if b]  # "": no ceiling table
    results["ceiling"] = ceiling_table(device, batches, args.ceiling_steps, warmup=max(3, args.ceiling_steps // 5))
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the pod path's workers are other processes: give them the memory back

    choices = {"auto": ["--precision", "auto"], "bf16": ["--precision", "bf16"], "tf32": ["--precision", "tf32"],
               "fp32": ["--precision", "fp32"], "fp32-128": ["--precision", "fp32", "--batch-size", "128"],
               "auto-512": ["--precision", "auto", "--batch-size", "512"],
               "auto-2048": ["--precision", "auto", "--batch-size", "2048"],
               "auto-cudnn-benchmark": ["--precision", "auto", "--cudnn-benchmark"]}  # fmt: skip
    wanted = [name for name in args.runs.split(",") if device.type == "cuda" or name not in ("bf16", "tf32")]
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        subprocess.run([sys.executable, "-m", "jobs.data.prepare", "--dest", str(work), "--synthetic",
                        str(args.images_per_class)], check=True, env=environment(), cwd=REPO_ROOT,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        data_dir = work / "cifar-10-batches-py"
        if device.type == "cpu":
            results["cpu_bf16"] = refused_line(data_dir, work)
            print(f"\n--precision bf16 on the CPU: {results['cpu_bf16']}")
        store, endpoint = start_store(work / "store.log")
        runs = []
        try:
            for name in wanted:
                print(f"\npod path, {name} ...", flush=True)
                run = run_pod(PodRun(name, choices[name]), data_dir, work, endpoint, args.epochs, args.run_timeout)
                with (out / "agents.log").open("a") as logs:  # one file: few files come back from a device machine
                    logs.write(f"===== {name}: {' '.join(choices[name])}\n" + (work / f"agent-{name}.log").read_text())
                runs.append(run)
                print(
                    f"  {run.settings_line}\n  exit {run.returncode}, {run.steady_images_per_s} images/s, "
                    f"test accuracy {run.test_accuracy}, first step {run.worker_first_step} s",
                    flush=True,
                )
        finally:
            store.terminate()
            store.wait(timeout=30)
    results["pod_path"] = [{**asdict(run), "steady_images_per_s": run.steady_images_per_s} for run in runs]
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")

    print(f"\n{card}: ceiling (model alone, images/s)")
    for row in results["ceiling"]:
        print(
            f"  {row['precision']:5} {'channels_last' if row['channels_last'] else 'NCHW':13} batch {row['batch']:5} "
            f"{row['images_per_s']:10.0f}"
        )
    print_pod_table(runs, args.epochs, 10 * args.images_per_class)
    print(f"\nresults: {out / 'results.json'}")


if __name__ == "__main__":
    main()
