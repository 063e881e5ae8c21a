"""`--trace-samples DIR`: every worker writes which images it trained on at every step (off by default).

One JSON line per step and worker, in DIR/samples-<group>-rank<R>.jsonl (a file per worker
process: a worker belongs to one group, the workers of one rendezvous round):

    {"group": G, "world_size": W, "rank": R, "epoch": E, "start": S, "stop": T, "indices": [...], "time": t}

[S, T) are the step's positions in epoch E's order (jobs.data.sampling), `indices` this worker's
images, in the order it used them (empty for a worker that took the step with a zero-weight
sample). Lines are flushed as they are written, so a worker killed mid-run leaves every step it
finished. Tests and benchmarks/preemption.py read these files to check that an interrupted run
trained on exactly the images an uninterrupted one would have, and to count the steps a
preemption cost.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from jobs.training.distributed import WorkerPlace
from jobs.data.sampling import Step


class SampleTrace:
    def __init__(self, directory: Path, place: WorkerPlace, group: int):
        directory.mkdir(parents=True, exist_ok=True)
        self._file = open(directory / f"samples-{group}-rank{place.rank}.jsonl", "a", buffering=1)
        self._fixed = {"group": group, "world_size": place.world_size, "rank": place.rank}

    def record(self, epoch: int, step: Step, indices: torch.Tensor) -> None:
        # tolist() waits for the device: tracing is for tests and measurements, not for speed.
        line = {**self._fixed, "epoch": epoch, "start": step.start, "stop": step.stop,
                "indices": indices.tolist(), "time": round(time.time(), 4)}  # fmt: skip
        self._file.write(json.dumps(line) + "\n")

    def close(self) -> None:
        self._file.close()


def read_traces(directory: Path) -> list[dict]:
    """Every line of every trace file in `directory`; a line torn by a kill is skipped."""
    records = []
    for path in sorted(Path(directory).glob("samples-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


@dataclass(frozen=True)
class TracedStep:
    """One step of one group, all its workers' lines together."""

    group: int
    world_size: int
    epoch: int
    start: int
    stop: int
    indices: tuple[int, ...]  # the step's images, rank 0's share first
    ranks: int  # how many workers' lines were found (world_size if none was lost)
    time: float  # when the last worker finished it


def traced_steps(records: list[dict]) -> list[TracedStep]:
    """Trace lines grouped into steps, in the order they were taken."""
    lines: dict[tuple[int, int, int], list[dict]] = {}
    for record in records:
        lines.setdefault((record["group"], record["epoch"], record["start"]), []).append(record)
    steps = []
    for (group, epoch, start), parts in lines.items():
        parts.sort(key=lambda part: part["rank"])
        steps.append(TracedStep(group, parts[0]["world_size"], epoch, start, parts[0]["stop"],
                                tuple(i for part in parts for i in part["indices"]), len(parts),
                                max(part["time"] for part in parts)))  # fmt: skip
    return sorted(steps, key=lambda step: step.time)


def committed_and_lost(history: list[dict], steps: list[TracedStep]) -> tuple[list[TracedStep], list[TracedStep]]:
    """Split steps into those the final model contains and those computed in vain.

    Groups follow each other in the order of their "start" records in history.jsonl; each starts
    where the checkpoint it read left off. A group's steps at or after the next group's start
    were lost with it (recomputed by a later group); the last group's steps all count."""
    starts = [record for record in history if record["event"] == "start"]
    resume_points = {record["group"]: (record["epochs_done"], record.get("position", 0)) for record in starts}
    order = [record["group"] for record in starts]
    committed: list[TracedStep] = []
    lost: list[TracedStep] = []
    for index, group in enumerate(order):
        following = resume_points[order[index + 1]] if index + 1 < len(order) else None
        for step in (s for s in steps if s.group == group):
            keep = following is None or (step.epoch, step.start) < following
            (committed if keep else lost).append(step)
    return committed, lost
