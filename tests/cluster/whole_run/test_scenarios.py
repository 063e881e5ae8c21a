"""Issue 37, scenarios of pods, processes and the control plane: the `local` stack's pipeline on a --run-pods
control plane (scenario.py: its shape), one fault each, every verdict checked against the truth read from the
shared volume (faults.invariants). Nodes lost, with or without notice: test_node_scenarios.py (its own
control plane, so that the two files run side by side).
"""

from __future__ import annotations

import json
import time

import pytest

from faults import crash_container, evict, kill_training_process, pods_of, replacement_of
from kube import wait_until
from scenario import begin, end, plane_of_three_nodes
from stack_run import index_of


# In the test command; `pytest -m scenarios` runs this tier alone (scripts/chaos.sh: more seeds).
pytestmark = pytest.mark.scenarios


@pytest.fixture(scope="module")
def plane(tools_bin, tmp_path_factory):
    yield from plane_of_three_nodes(tools_bin, tmp_path_factory, "run-pods-scenarios")


def test_an_evicted_worker_is_replaced_and_rejoins(plane, synth_stack):
    run = begin(plane, synth_stack, "evicted", "epochs=4")
    victim = run.running_workers()[0]
    evicted_at = time.time()
    evict(run, victim["metadata"]["name"])
    wait_until("the evicted worker's replacement", lambda: replacement_of(run, victim), timeout=180)
    rejoined = wait_until(
        "a group of 3 after the eviction",
        lambda: [
            e for e in run.history() if e.get("event") == "start" and e["time"] > evicted_at and e["world_size"] == 3
        ],
        timeout=240,
    )
    end(run, "Succeeded", rejoined_after=round(rejoined[0]["time"] - evicted_at, 1))


def test_a_worker_that_fails_for_good_leaves_min_workers_to_finish(plane, synth_stack):
    run = begin(plane, synth_stack, "fails-for-good", "epochs=6")
    index = run.running_workers()[0]["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
    crashes = 0
    # backoffLimitPerIndex 2 (controller/render.py's default): the third counted failure fails the index.
    while crashes < 3 and run.verdict() is None:
        pod = wait_until(
            f"a running worker of index {index}",
            lambda: [
                p
                for p in run.running_workers()
                if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == index
            ],
            timeout=180,
        )[0]
        wait_until(
            "its container started",
            lambda: list(
                (plane.dir / "pods").glob(f"{run.namespace}_{pod['metadata']['name']}_*/elasticjob-worker.pid")
            ),
            timeout=60,
        )
        crash_container(run, pod["metadata"]["name"], "elasticjob-worker")
        crashes += 1
        wait_until(
            "the crashed pod Failed",
            lambda: all(
                p["status"].get("phase") == "Failed"
                for p in run.workers()
                if p["metadata"]["uid"] == pod["metadata"]["uid"]
            ),
            timeout=60,
        )
    job = json.loads(plane.kubectl("get", "job", run.name, "-n", run.namespace, "-o", "json").stdout)
    end(run, "Succeeded", workers_crashed=True, crashes=crashes, failed_indexes=job["status"].get("failedIndexes"))
    assert crashes == 3, "the run ended before the index failed for good: make it longer"


def test_an_agent_out_of_max_restarts_ends_failed(plane, synth_stack):
    """min = max = 2 workers and --max_restarts 0: every time index 0's training process is killed its
    agent is out of restarts and exits 1 (its peer's too, whose collective failed under it), the Job
    re-creates the pod, counted; the third counted failure fails the index and, with no index to spare,
    the Job. The run never finishes, and must never be called Succeeded (issue 36: torch's rendezvous
    close, the Job's per-index retry and our exit codes once made such a run Succeeded)."""
    run = begin(
        plane, synth_stack, "max-restarts", "workers=2", "minWorkers=2", "maxWorkers=2", "maxRestarts=0", "epochs=12"
    )
    killed: set[str] = set()
    while run.verdict() is None and len(killed) < 6:
        fresh = wait_until(
            "index 0 training again, or the verdict",
            lambda: (
                run.verdict()
                or [p for p in run.running_workers() if index_of(p) == "0" and p["metadata"]["uid"] not in killed]
            ),
            timeout=240,
        )
        if isinstance(fresh, str):
            break
        victim = fresh[0]
        try:
            kill_training_process(run, victim["metadata"]["name"])
            killed.add(victim["metadata"]["uid"])
        except (AssertionError, ProcessLookupError):
            killed.add(victim["metadata"]["uid"])  # the pod ended first (its peer's failure stopped the group)
    job = json.loads(plane.kubectl("get", "job", run.name, "-n", run.namespace, "-o", "json").stdout)
    failed_index = job["status"].get("failedIndexes")
    # Why it failed: an index out of its retries, each a pod whose agent exited 1 (out of restarts), counted.
    exits_1 = [
        p
        for p in run.workers()
        if index_of(p) == failed_index
        and any(
            ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 1
            for s in (p.get("status") or {}).get("containerStatuses") or []
        )
    ]
    end(
        run, "Failed", workers_crashed=True, kills=len(killed), failed_index=failed_index, epochs_done=run.epochs_done()
    )
    assert failed_index in ("0", "1") and len(exits_1) >= 3, (failed_index, [p["metadata"]["name"] for p in exits_1])


def test_the_controller_killed_mid_run_makes_no_second_job(plane, synth_stack):
    run = begin(plane, synth_stack, "controller-killed", "epochs=4")
    job_uid = json.loads(plane.kubectl("get", "job", run.name, "-n", run.namespace, "-o", "json").stdout)["metadata"][
        "uid"
    ]
    controller = pods_of(run, "elasticjob-controller-")[0]
    crash_container(run, controller["metadata"]["name"], "controller")
    wait_until(
        "the controller restarted in its pod",
        lambda: (
            (p := pods_of(run, "elasticjob-controller-"))
            and p[0]["status"]["containerStatuses"][0]["restartCount"] >= 1
            and p[0]["status"]["containerStatuses"][0]["ready"]
        ),
        timeout=120,
    )
    plane.kubectl("delete", "pod", controller["metadata"]["name"], "-n", run.namespace, "--wait=false")
    wait_until(
        "a new controller pod",
        lambda: [
            p for p in pods_of(run, "elasticjob-controller-") if p["metadata"]["uid"] != controller["metadata"]["uid"]
        ],
        timeout=120,
    )
    end(run, "Succeeded")
    jobs = json.loads(plane.kubectl("get", "jobs", "-n", run.namespace, "-o", "json").stdout)["items"]
    training = [j for j in jobs if j["metadata"]["name"] == run.name]
    assert [j["metadata"]["uid"] for j in training] == [job_uid], "the Job was replaced or doubled"


def test_workers_raised_mid_run_grow_the_group_without_restarting_the_others(plane, synth_stack):
    run = begin(plane, synth_stack, "raised", "workers=2", "minWorkers=2", "maxWorkers=3", "epochs=5")
    before = {p["metadata"]["uid"] for p in run.running_workers()}
    raised_at = time.time()
    plane.kubectl(
        "patch",
        "elasticjob",
        run.name,
        "-n",
        run.namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"replicaSpecs": {"Worker": {"replicas": 3}}}}),
    )
    grown = wait_until(
        "a group of 3",
        lambda: [
            e for e in run.history() if e.get("event") == "start" and e["time"] > raised_at and e["world_size"] == 3
        ],
        timeout=240,
    )
    still = {p["metadata"]["uid"] for p in run.running_workers()}
    end(run, "Succeeded", grown_after=round(grown[0]["time"] - raised_at, 1))
    assert before <= still, "a worker that was running was replaced when the group grew"


def test_the_api_server_restarted_mid_run(plane, synth_stack):
    """The API server down for 15 s in the middle of training (a control-plane upgrade, a crash): the workers
    train on (they need the store, not the API), the controller keeps its Job and leads again, the kubelets
    report again; the run ends Succeeded, with one Job and nothing crashed."""
    run = begin(plane, synth_stack, "api-restart", "epochs=6")
    job_uid = json.loads(plane.kubectl("get", "job", run.name, "-n", run.namespace, "-o", "json").stdout)["metadata"][
        "uid"
    ]
    down_at = time.time()
    plane.restart_apiserver(down_seconds=15)
    end(run, "Succeeded", back_after=round(time.time() - down_at, 1))
    jobs = json.loads(plane.kubectl("get", "jobs", "-n", run.namespace, "-o", "json").stdout)["items"]
    assert [j["metadata"]["uid"] for j in jobs if j["metadata"]["name"] == run.name] == [job_uid], jobs
