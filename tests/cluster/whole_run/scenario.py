"""What every whole-run scenario shares (test_scenarios.py, test_node_scenarios.py, test_chaos.py): the run's
shape, its start up to the first group formed, and its end, where the verdict is checked against the truth
read from the shared volume (faults.invariants).

Shape: 3 workers, minWorkers 2, maxWorkers 3, one worker per node (workersPerNode 1), a ReadWriteMany
claim (the shared folder every node reaches, as EFS), generated data; each run in its own namespace, on a
--run-pods control plane of three kind nodes (everything real but the machines: scripts/pod_runner.py).
"""

from __future__ import annotations

from faults import CONTROL_PLANE_NODE, invariants, node_of, pin_components, pods_of
from kube import wait_until
from run_pods_plane import start_plane, stop_plane
from stack_run import StackRun, seconds_since

SHAPE = ("workers=3", "minWorkers=2", "maxWorkers=3", "epochs=3", "storageAccessMode=ReadWriteMany", "workersPerNode=1")
VERDICT_SECONDS = 600
NODES = 3


def plane_of_three_nodes(tools_bin, tmp_path_factory, name: str):
    """A module's --run-pods control plane (a generator for a module fixture: up, yield, down)."""
    plane = start_plane(tmp_path_factory.mktemp(name), tools_bin, node_count=NODES)
    yield plane
    stop_plane(plane)


def begin(plane, synth_stack, namespace: str, *overrides: str, store_node: str = CONTROL_PLANE_NODE) -> StackRun:
    """The run up to its first group formed; overrides after SHAPE win."""
    run = StackRun(plane, synth_stack("local", f"namespace={namespace}", *SHAPE, *overrides))
    pin_components(run, store_node)
    run.apply_base()
    stores = wait_until(
        "the store running", lambda: [node_of(p) for p in pods_of(run, "rendezvous-store-")], timeout=120
    )
    assert stores == [store_node], f"the store runs on {stores}, not on {store_node} as the scenario means"
    run.prepare()
    run.start_training()
    run.wait_training()
    return run


def end(run: StackRun, expected: str, workers_crashed: bool = False, **measures) -> None:
    """The verdict, which must be `expected` and the truth, every invariant kept; then the run removed."""
    verdict = run.wait_verdict(VERDICT_SECONDS)
    print(
        f"\n{run.namespace}: {verdict} after {seconds_since(run.started)} s; {measures}; controller CPU "
        f"{run.controller_cpu_share():.1%}; history: "
        f"{[(e['event'], e.get('epoch', e.get('world_size'))) for e in run.history()]}"
    )
    broken = invariants(run, verdict, workers_crashed)
    try:
        assert not broken, broken
        assert verdict == expected, f"{verdict}, expected {expected}\n{run.pod_logs('train-')[-6000:]}"
    finally:
        run.remove()
