"""status.progress from a run's history.jsonl (controller/progress.py), written by jobs/'s own writer."""

from __future__ import annotations

from pathlib import Path

from controller import progress
from elastic_training import run_directory
from jobs.training import checkpoint


def worker_elasticjob(run_dir: str) -> dict:
    return {
        "spec": {
            "replicaSpecs": {
                "Worker": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "elasticjob-worker",
                                    "args": ["--nnodes=1:2", "-m", "mytrain", "--epochs", "4"],
                                    "env": [
                                        {"name": "HOME", "value": "/tmp"},
                                        {"name": run_directory.RUN_DIR_ENV, "value": run_dir},
                                    ],
                                }
                            ]
                        }
                    }
                }
            }
        }
    }


def write_history(run_dir: Path, records: list[dict]) -> None:
    for record in records:
        checkpoint.append_history(run_dir, record)


def test_progress_from_a_history_jobs_train_wrote(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    clock = iter([1000.0, 1010.0, 1020.0, 1025.0, 1030.0, 1040.0])
    monkeypatch.setattr(checkpoint.time, "time", lambda: next(clock))
    write_history(
        run_dir,
        [
            {"event": "start", "epochs_done": 0, "position": 0, "epochs": 4, "world_size": 2, "restart_count": 0},
            {
                "event": "epoch",
                "epoch": 1,
                "loss": 2.1,
                "train_accuracy": 0.25,
                "images_per_second": 500.0,
                "seconds": 9.0,
                "world_size": 2,
            },
            {
                "event": "epoch",
                "epoch": 2,
                "loss": 1.7,
                "train_accuracy": 0.4,
                "images_per_second": 520.0,
                "seconds": 9.0,
                "world_size": 2,
            },
            {"event": "checkpoint", "epochs_done": 2, "position": 1280, "world_size": 2, "reason": "sigterm"},
            {"event": "start", "epochs_done": 2, "position": 1280, "epochs": 4, "world_size": 1, "restart_count": 1},
            {"event": "checkpoint", "epochs_done": 2, "position": 2560, "world_size": 1, "reason": "time"},
        ],
    )
    result = progress.read(worker_elasticjob(str(run_dir)), tmp_path)
    assert result == {
        "epoch": 2,
        "epochs": 4,
        "worldSize": 1,
        "restarts": 1,
        "imagesIntoEpoch": 2560,
        "loss": 1.7,
        "accuracy": 0.4,
        "imagesPerSecond": 520.0,
        "secondsLeft": 18,
        "goodput": round(18 / 40, 3),
        "finished": False,
        "updated": "1970-01-01T00:17:20Z",
    }


def test_a_torn_last_line_is_skipped(tmp_path):
    (tmp_path / "history.jsonl").write_text(
        '{"event": "start", "epochs": 3, "epochs_done": 0, "time": 5}\n{"event": "ep'
    )
    assert progress.read(worker_elasticjob(str(tmp_path)), tmp_path)["epochs"] == 3


def test_nothing_is_read_outside_the_shared_volume(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "history.jsonl").write_text('{"event": "start", "epochs": 3, "time": 5}\n')
    shared = tmp_path / "shared"
    shared.mkdir()
    assert progress.read(worker_elasticjob(str(outside)), shared) is None
    assert progress.read(worker_elasticjob(str(shared / ".." / "elsewhere")), shared) is None


def test_a_symbolic_link_out_of_the_shared_volume_is_not_followed(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "history.jsonl").write_text('{"event": "start", "epochs": 3, "time": 5}\n')
    shared = tmp_path / "shared"
    (shared / "run").mkdir(parents=True)
    (shared / "run" / "history.jsonl").symlink_to(outside / "history.jsonl")
    run = progress.history(worker_elasticjob(str(shared / "run")), shared)
    assert (run.known, run.progress) == (False, None)


def test_a_hung_mount_never_holds_the_calling_thread_even_in_resolving_the_path(tmp_path, monkeypatch):
    """Review ctrl-1 item 3: Path.resolve() stats every component of the path, and a stat on a hung
    NFS mount blocks in the kernel; it ran in the reconcile thread, before the bounded read."""
    import threading
    import time

    release = threading.Event()
    real_resolve = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **k: release.wait(30) and real_resolve(self, *a, **k))
    started = time.monotonic()
    run = progress.history(worker_elasticjob(str(tmp_path / "run")), tmp_path, seconds=0.5)
    took = time.monotonic() - started
    release.set()
    assert took < 2 and run.known and "took more than 0.5 s" in run.error, (took, run)


def test_no_history_no_run_dir_no_mount(tmp_path):
    assert progress.read(worker_elasticjob(str(tmp_path)), tmp_path) is None
    assert progress.read({"spec": {}}, tmp_path) is None
    assert progress.read(worker_elasticjob(str(tmp_path)), None) is None


def test_the_run_dir_is_the_worker_containers_environment_not_its_arguments():
    """Any training command: the controller reads ELASTIC_TRAINING_RUN_DIR, never --run-dir out of the
    arguments (issue 38; a user's script has no such option)."""
    elasticjob = worker_elasticjob("/efs/runs/a")
    assert progress.run_dir(elasticjob) == "/efs/runs/a"
    container = elasticjob["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["args"] = ["-m", "jobs.training.train", "--run-dir", "/efs/runs/b"]
    assert progress.run_dir(elasticjob) == "/efs/runs/a"
    container["env"] = [{"name": "HOME", "value": "/tmp"}]
    assert progress.run_dir(elasticjob) is None


def test_progress_of_a_script_on_the_library_is_its_steps(tmp_path):
    """A training script on elastic_training (issue 38) reports steps, not epochs: its real history, written
    by elastic_training.Run in one process, shows as the step reached and the last loss it logged."""
    import os
    import subprocess
    import sys

    run_dir = tmp_path / "runs" / "mine"
    script = (
        "import elastic_training\n"
        "run = elastic_training.Run(progress_every_seconds=0)\n"
        "run.resume()\n"
        "for step in range(7):\n"
        "    run.log(step + 1, loss=1.0 / (step + 1))\n"
        "    run.step_done(step + 1, lambda: {})\n"
        "run.finish()\n"
    )
    subprocess.run(
        [sys.executable, "-c", script],
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, run_directory.RUN_DIR_ENV: str(run_dir)},
    )
    result = progress.read(worker_elasticjob(str(run_dir)), tmp_path)
    assert result["step"] == 7 and result["loss"] == round(1 / 7, 6) and result["finished"] is True
    assert result["epochs"] is None


def test_no_goodput_until_wall_time_has_passed(tmp_path):
    """Two lines stamped in the same millisecond (append_history rounds `time` to it) have no wall time between
    them: a share of no time is no figure, so `goodput` is absent, and `status` prints the rest (issue 41)."""
    write_history(
        tmp_path,
        [
            {
                "event": "start",
                "epochs_done": 0,
                "position": 0,
                "epochs": 5,
                "world_size": 2,
                "restart_count": 0,
                "time": 1000.0,
            },
            {
                "event": "epoch",
                "epoch": 1,
                "loss": 1.9,
                "train_accuracy": 0.31,
                "images_per_second": 800.0,
                "seconds": 0.5,
                "world_size": 2,
                "time": 1000.0,
            },
        ],
    )
    result = progress.read(worker_elasticjob(str(tmp_path)), tmp_path)
    assert "goodput" not in result and result["epoch"] == 1 and result["secondsLeft"] == 2
    from infra.cli.status import lines

    printed = lines({"metadata": {"namespace": "training", "name": "train-r1"}, "status": {"progress": result}})
    assert any(line.startswith("progress: epoch 1/5") and "goodput" not in line for line in printed)


def test_a_fifo_in_place_of_the_history_is_refused_at_once(tmp_path):
    """Issue 36 item 8: open() of a FIFO with no writer waits for ever; the controller's only worker
    thread must never wait on a run's file."""
    import os
    import threading

    os.mkfifo(tmp_path / "history.jsonl")
    box = {}
    reader = threading.Thread(
        target=lambda: box.update(h=progress.history(worker_elasticjob(str(tmp_path)), tmp_path)), daemon=True
    )
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert box["h"].known and box["h"].progress is None and "not a regular file" in box["h"].error
    assert box["h"].finished is None  # no verdict from it (status.verifying waits, then the Job's word)


def test_a_read_that_hangs_is_given_up_within_its_bound(tmp_path, monkeypatch):
    """A hung volume (open() or read() blocked in the kernel) costs one bounded wait, then none."""
    import threading
    import time

    release = threading.Event()
    monkeypatch.setattr(progress, "_read_tail", lambda path: release.wait(30) and b"")
    (tmp_path / "history.jsonl").write_text("")
    started = time.monotonic()
    first = progress.history(worker_elasticjob(str(tmp_path)), tmp_path, seconds=0.5)
    assert time.monotonic() - started < 2 and "took more than 0.5 s" in first.error
    started = time.monotonic()
    second = progress.history(worker_elasticjob(str(tmp_path)), tmp_path, seconds=0.5)
    assert time.monotonic() - started < 0.2 and "has not returned yet" in second.error  # no second stuck thread
    release.set()


def test_no_file_or_no_start_record_is_no_history_not_an_unfinished_run(tmp_path):
    """Review ctrl-1 item 2: a script that writes no history (docs/runs.md: JobCompleteUnconfirmed)
    gave finished=False, so its Complete Job ended Failed/RunNotFinished."""
    assert progress.history(worker_elasticjob(str(tmp_path)), tmp_path).finished is None
    write_history(tmp_path, [{"event": "checkpoint", "epochs_done": 1, "position": 0}])
    assert progress.history(worker_elasticjob(str(tmp_path)), tmp_path).finished is None
    write_history(tmp_path, [{"event": "start", "epochs_done": 1, "position": 0, "epochs": 3}])
    assert progress.history(worker_elasticjob(str(tmp_path)), tmp_path).finished is False
    write_history(tmp_path, [{"event": "finished", "epochs": 3}])
    assert progress.history(worker_elasticjob(str(tmp_path)), tmp_path).finished is True


def test_a_line_of_the_wrong_type_is_skipped_not_fatal(tmp_path):
    """Issue 36 item 9: `"epochs": "5"` raised in summarize on every pass, before the status write."""
    write_history(
        tmp_path,
        [
            {"event": "start", "epochs_done": 0, "position": 0, "epochs": 5, "world_size": 2, "restart_count": 0},
            {
                "event": "epoch",
                "epoch": 1,
                "loss": 2.0,
                "train_accuracy": 0.3,
                "images_per_second": 100.0,
                "seconds": 1.0,
                "world_size": 2,
            },
            {"event": "start", "epochs_done": "1", "position": 0, "epochs": "5", "world_size": 2, "restart_count": 1},
            {"event": "epoch", "epoch": None, "loss": "low", "seconds": [1], "world_size": 2},
            {"event": 7},
            {"event": "finished", "epochs": 5},
        ],
    )
    with open(tmp_path / "history.jsonl", "a") as file:
        file.write('["a list"]\n"a string"\n{"event": "epoch", "epoch": true}\n')
    run = progress.history(worker_elasticjob(str(tmp_path)), tmp_path)
    assert run.error is None and run.finished is True
    assert (run.progress["epoch"], run.progress["epochs"], run.progress["restarts"]) == (1, 5, 0)


def test_a_history_the_summary_cannot_handle_is_an_error_not_an_exception(tmp_path, monkeypatch):
    write_history(tmp_path, [{"event": "start", "epochs_done": 0, "position": 0, "epochs": 5}])
    monkeypatch.setattr(progress, "summarize", lambda records: 1 / 0)
    run = progress.history(worker_elasticjob(str(tmp_path)), tmp_path)
    assert run.progress is None and "ZeroDivisionError" in run.error


def test_only_the_tail_of_a_huge_history_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "MAX_BYTES", 1000)
    with open(tmp_path / "history.jsonl", "w") as file:
        file.write('{"event": "epoch", "epoch": 1, "seconds": 1.0}\n' * 1000)
        file.write('{"event": "start", "epochs_done": 1, "position": 0, "epochs": 3, "time": 5}\n')
    assert len(progress.read_records(tmp_path / "history.jsonl")) < 30
    assert progress.read(worker_elasticjob(str(tmp_path)), tmp_path)["epochs"] == 3


def mounted(elasticjob: dict, mount_path: str, sub_path: str | None = None, claim: bool = True) -> dict:
    """The ElasticJob with its worker container mounting a volume (a claim, or an emptyDir) at `mount_path`."""
    pod = elasticjob["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod["volumes"] = [
        {"name": "shared", **({"persistentVolumeClaim": {"claimName": "shared-data"}} if claim else {"emptyDir": {}})}
    ]
    pod["containers"][0]["volumeMounts"] = [
        {"name": "shared", "mountPath": mount_path, **({"subPath": sub_path} if sub_path else {})}
    ]
    return elasticjob


def test_the_run_dir_is_read_through_the_workers_claim_mount_wherever_it_is_mounted(tmp_path):
    """The worker mounts the claim at /data (or a subPath of it at /work), the controller the same claim at
    its --shared-root: the run directory's place on the claim is read there (found by the whole-run tier,
    issue 37: a controller whose mount path differed from the workers' read no history and gave a run that
    finished on its minimum workers the Job's Failed)."""
    (tmp_path / "runs" / "a").mkdir(parents=True)
    write_history(
        tmp_path / "runs" / "a",
        [
            {
                "event": "start",
                "epochs_done": 0,
                "position": 0,
                "epochs": 1,
                "world_size": 2,
                "restart_count": 0,
                "time": 1000.0,
            },
            {"event": "finished", "epochs": 1, "time": 1001.0},
        ],
    )
    assert progress.read(mounted(worker_elasticjob("/data/runs/a"), "/data"), tmp_path)["finished"] is True
    assert progress.read(mounted(worker_elasticjob("/work/a"), "/work", sub_path="runs"), tmp_path)["finished"] is True
    assert progress.read(mounted(worker_elasticjob("//data/runs/a"), "/data"), tmp_path)["finished"] is True
    # The claim the controller mounts (--shared-claim) and no other.
    assert progress.read(mounted(worker_elasticjob("/data/runs/a"), "/data"), tmp_path, claim="shared-data")["finished"]
    assert progress.read(mounted(worker_elasticjob("/data/runs/a"), "/data"), tmp_path, claim="another") is None
    # Not on the claim (an emptyDir): no history to read.
    assert progress.read(mounted(worker_elasticjob("/data/runs/a"), "/data", claim=False), tmp_path) is None
    # An emptyDir mounted inside the claim's mount holds the run directory: not the claim's file either.
    elasticjob = mounted(worker_elasticjob("/data/scratch/a"), "/data")
    pod = elasticjob["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod["volumes"].append({"name": "scratch", "emptyDir": {}})
    pod["containers"][0]["volumeMounts"].append({"name": "scratch", "mountPath": "/data/scratch"})
    (tmp_path / "scratch" / "a").mkdir(parents=True)
    write_history(tmp_path / "scratch" / "a", [{"event": "finished", "epochs": 1, "time": 1001.0}])
    assert progress.history_file(elasticjob, tmp_path) is None
    # A subPathExpr names its folder through the pod's environment: not settled by the template.
    elasticjob = mounted(worker_elasticjob("/data/runs/a"), "/data")
    elasticjob["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMounts"][0][
        "subPathExpr"
    ] = "u/$(POD_NAME)"
    assert progress.history_file(elasticjob, tmp_path) is None
    # A subPath that climbs out of the claim is still refused (the read stays under the shared root).
    assert progress.history_file(mounted(worker_elasticjob("/w/a"), "/w", sub_path="../.."), tmp_path) is None
