"""One run of a stack's pipeline on a control plane started with --run-pods (scripts/pod_runner.py): the
objects `elastic-training synth` rendered, applied with kubectl in the engine's order (the store and the
controller, the data-prep Job, the ElasticJob, the test Job), every pod a real process of this checkout.

The truth of a run is read from the shared volume, not from any status: Succeeded must mean `model.pt`
written and the last epoch in the run's history.jsonl (jobs/training writes one line per event).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from control_plane import ControlPlane
from elastic_training import history as history_schema, run_directory
from kube import CRD, apply, kind_rank, wait_established, wait_until
from synth_support import Synth

TRAINING_KINDS = ("Job", "ElasticJob")
VERDICTS = ("Succeeded", "Failed")
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
# What a crashed Python or Go component leaves in its log.
CRASH_MARKERS = ("Traceback (most recent call last)", "panic: ", "goroutine 1 [")


class StackRun:
    def __init__(self, plane: ControlPlane, synth: Synth):
        self.plane = plane
        self.manifests = synth.manifests
        self.elasticjob = next(m for m in self.manifests if m["kind"] == "ElasticJob")
        self.namespace = self.elasticjob["metadata"]["namespace"]
        self.name = self.elasticjob["metadata"]["name"]
        jobs = [m for m in self.manifests if m["kind"] == "Job"]
        self.prep = next(j for j in jobs if j["metadata"]["name"].startswith("prep-"))
        self.test = next(j for j in jobs if j["metadata"]["name"].startswith("eval-"))
        claim = next(m for m in self.manifests if m["kind"] == "PersistentVolumeClaim")["metadata"]["name"]
        worker = self.elasticjob["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        # The run directory of any training command: the stack sets it in the worker's environment.
        run_dir = next(v["value"] for v in worker["env"] if v["name"] == run_directory.RUN_DIR_ENV)
        args = worker.get("args") or []
        # Our CIFAR-10 training says how many epochs make the run; a script of the user's says it finished.
        self.epochs = int(args[args.index("--epochs") + 1]) if "--epochs" in args else None
        # The run directory in the pods' paths (/efs-shared/runs/<id>) is this folder of the claim.
        self.run_dir = plane.shared_volumes / self.namespace / claim / run_dir.removeprefix("/efs-shared/")
        self.started = time.monotonic()

    # -- applying, in the engine's order -----------------------------------------------------------------
    def apply_base(self) -> None:
        """Everything but the three workloads, then wait for the store and the controller to be available."""
        crds = [m for m in self.manifests if m["kind"] == CRD]
        apply(self.plane, crds)
        wait_established(self.plane, [c["metadata"]["name"] for c in crds])
        rest = [m for m in self.manifests if m["kind"] not in (*TRAINING_KINDS, CRD) and not self._training_budget(m)]
        apply(self.plane, sorted(rest, key=kind_rank))
        for deployment in (m for m in rest if m["kind"] == "Deployment"):
            self.plane.kubectl(
                "rollout",
                "status",
                f"deployment/{deployment['metadata']['name']}",
                "-n",
                self.namespace,
                "--timeout=180s",
                timeout=200,
            )

    def _training_budget(self, obj: dict[str, Any]) -> bool:
        return obj["kind"] == "PodDisruptionBudget" and obj["metadata"]["name"] == self.name

    def prepare(self, timeout: float = 240) -> None:
        apply(self.plane, [self.prep])
        assert self.wait_job(self.prep["metadata"]["name"], timeout) == "Complete", self.pod_logs("prep-")

    def start_training(self) -> None:
        apply(self.plane, [self.elasticjob] + [m for m in self.manifests if self._training_budget(m)])
        self.started = time.monotonic()

    def evaluate(self, timeout: float = 240) -> str:
        apply(self.plane, [self.test])
        return self.wait_job(self.test["metadata"]["name"], timeout)

    # -- reading -----------------------------------------------------------------------------------------
    def get(self, *args: str) -> Any:
        result = self.plane.kubectl("get", *args, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def wait_job(self, name: str, timeout: float) -> str:
        def ended():
            job = self.get("job", name) or {}
            for condition in (job.get("status") or {}).get("conditions") or []:
                if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
                    return condition["type"]
            return None

        return wait_until(f"Job {self.namespace}/{name} to end", ended, timeout=timeout, every=1)

    def verdict(self) -> str | None:
        job = self.get("elasticjob", self.name) or {}
        for condition in (job.get("status") or {}).get("conditions") or []:
            if condition["type"] in VERDICTS and condition["status"] == "True":
                return condition["type"]
        return None

    def wait_verdict(self, timeout: float = 600) -> str:
        return wait_until(f"ElasticJob {self.namespace}/{self.name}'s verdict", self.verdict, timeout=timeout, every=1)

    def history(self) -> list[dict[str, Any]]:
        path = self.run_dir / "history.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def epochs_done(self) -> int:
        return max([e["epoch"] for e in self.history() if e.get("event") == "epoch"], default=0)

    def truth(self) -> bool:
        """Whether the run really finished: model.pt written and the last epoch in the history (a script of
        the user's: its history's `finished` line, which elastic_training.Run writes as it ends)."""
        if self.epochs is None:
            return any(e.get("event") == history_schema.FINISHED for e in self.history())
        return (self.run_dir / run_directory.MODEL).is_file() and self.epochs_done() >= self.epochs

    def workers(self) -> list[dict[str, Any]]:
        found = self.get("pods", "-l", f"{JOB_NAME_LABEL}={self.name}") or {"items": []}
        return found["items"]

    def running_workers(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.workers()
            if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]

    def wait_training(self, what: str = "an epoch in progress", timeout: float = 300) -> None:
        """Until the group has started (its `start` line in the history) and the workers run."""
        wait_until(
            f"{self.name}: {what}",
            lambda: any(e.get("event") == "start" for e in self.history()) and len(self.running_workers()) >= 1,
            timeout=timeout,
            every=0.5,
        )

    def pod_logs(self, prefix: str = "") -> str:
        logs = sorted((self.plane.dir / "pods").glob(f"{self.namespace}_{prefix}*/*.log"))
        return "\n".join(f"--- {p.parent.name}/{p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)

    def controller_cpu_share(self) -> float:
        """The CPU time of this run's controller process (the one running now: a crash restarts it) over
        its age, 0.0 when none runs: what it costs the node it shares with the training."""
        shares = []
        for pid_file in (self.plane.dir / "pods").glob(f"{self.namespace}_elasticjob-controller-*/controller.pid"):
            try:
                fields = Path(f"/proc/{int(pid_file.read_text())}/stat").read_text().rsplit(")", 1)[1].split()
                uptime = float(Path("/proc/uptime").read_text().split()[0])
            except (OSError, ValueError):
                continue  # that pod's process has ended
            ticks = os.sysconf("SC_CLK_TCK")
            # proc(5): utime and stime are fields 14 and 15, starttime 22 (after the name: 11, 12 and 19).
            cpu, age = (int(fields[11]) + int(fields[12])) / ticks, uptime - int(fields[19]) / ticks
            shares.append(cpu / age if age > 0 else 0.0)
        return max(shares, default=0.0)

    def crashes(self) -> list[str]:
        """Every log (this run's pods, the control plane's components) with a crash's marks in it."""
        logs = list((self.plane.dir / "pods").glob(f"{self.namespace}_*/*.log")) + list(
            (self.plane.dir / "logs").glob("*.log")
        )
        return [str(p) for p in logs if any(marker in p.read_text(errors="replace") for marker in CRASH_MARKERS)]

    def rounds_interleave(self) -> bool:
        """Whether two groups wrote the history at once. One group at a time writes, after its `start` line
        (which says how many epochs were done before it), the next epochs in order; an epoch line that is
        not the next one means another group wrote too."""
        expected = None
        for event in self.history():
            if event.get("event") == "start":
                expected = event.get("epochs_done", 0) + 1
            elif event.get("event") == "epoch":
                if event["epoch"] != expected:
                    return True
                expected += 1
        return False

    def remove(self) -> None:
        """This run's processes stopped (its namespace deleted; not waited for)."""
        self.plane.kubectl("delete", "namespace", self.namespace, "--wait=false", check=False)


def seconds_since(start: float) -> float:
    return round(time.monotonic() - start, 1)


def index_of(pod: dict[str, Any]) -> str:
    return pod["metadata"]["labels"][INDEX_LABEL]
