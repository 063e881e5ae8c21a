"""jobs.elastic.rendezvous against the real rendezvous store (python -m jobs.elastic.store_server), killed and started
again on the same address (empty, as a new store pod is), or stopped and continued (SIGSTOP: a
stalled store that keeps its data). torch's own c10d backend beside ours, so a torch whose
rendezvous changes shows here first. The handlers run in this process; one node per round where
a round must form at once (min = max = 1), and a clock and sleep we move where a bound must pass.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
import uuid
from base64 import b64decode, b64encode
from datetime import datetime, timedelta, timezone

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousConnectionError, RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import create_backend as torch_c10d_backend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler as torch_create_handler
from torchrun_harness import StoreServer

from infra.components.scheduling import CAPACITY_WAIT_SECONDS
from jobs.elastic import rendezvous
from jobs.elastic import store_client


def parameters(endpoint: str, run_id: str, min_nodes: int = 1, max_nodes: int = 1, **config) -> RendezvousParameters:
    return RendezvousParameters(rendezvous.BACKEND, endpoint, run_id, min_nodes=min_nodes, max_nodes=max_nodes,
                                local_addr="127.0.0.1", **{"last_call_timeout": 1, **config})  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    server = StoreServer(tmp_path_factory.mktemp("store")).start()
    yield server
    server.stop()


@pytest.fixture
def run_id() -> str:
    return f"rdzv-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def handlers():
    """Handlers made by a test, shut down at its end (their keep-alive threads stop)."""
    made = []
    yield made
    for handler in made:
        handler._stop_heartbeats()


def ours(store: StoreServer, run_id: str, handlers: list, **config):
    handler = rendezvous.create_handler(parameters(store.endpoint, run_id, **config))
    handlers.append(handler)
    return handler


def stored_state(store: StoreServer, run_id: str):
    """The round's state as it is in the store now, read by a client of our own (None: no state)."""
    client = dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=5))
    value = client.compare_set(f"torch.rendezvous.{run_id}", rendezvous.MISSING, rendezvous.MISSING)
    return None if value == rendezvous.MISSING.encode() else pickle.loads(b64decode(value))


def test_torch_s_c10d_backend_never_reconnects_and_reads_an_emptied_store_as_a_stale_state(store, run_id):
    """Upstream, as the issue measured it (upstream-facts-3.md fact 9): what jobs.elastic.rendezvous is for."""
    params = parameters(store.endpoint, run_id, read_timeout=5, is_host=False)  # 127.0.0.1 would make it host one
    backend, client = torch_c10d_backend(params)
    handler = torch_create_handler(client, backend, params)
    try:
        handler.next_rendezvous()
        store.restart()
        with pytest.raises(RendezvousConnectionError):
            handler.num_nodes_waiting()  # what the agent's monitor loop calls: torchrun exits 1
        fresh = dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=5))
        assert fresh.compare_set("missing", "old", "new") == b"old" and not fresh.check(["missing"])
    finally:
        handler._stop_heartbeats()


def test_an_emptied_store_gets_the_group_s_state_back_and_the_group_trains_on(store, run_id, handlers):
    handler = ours(store, run_id, handlers)
    handler.next_rendezvous()
    before = stored_state(store, run_id)
    assert handler.num_nodes_waiting() == 0
    # The keep-alive thread would put the state back on its own schedule, racing the emptiness check below
    # (under the test command's load it won once); here the agent's own call is what puts it back.
    handler._stop_heartbeats()
    store.restart()
    assert stored_state(store, run_id) is None
    time.sleep(1.1)  # torch's handler reads the store at most once a second (state cache)
    assert handler.num_nodes_waiting() == 0  # reconnected, put the state back, still its round
    after = stored_state(store, run_id)
    assert (after.round, after.participants, after.complete) == (before.round, before.participants, True)
    assert after.last_heartbeats[handler._this_node] > before.last_heartbeats[handler._this_node]  # renewed


def test_a_newcomer_that_starts_a_state_first_makes_the_group_re_form(store, run_id, handlers):
    """The newcomer race: after an empty restart a new node reaches the store before the group put
    its state back; it starts a round of its own. The group must see it is not in that round."""
    group = ours(store, run_id, handlers, min_nodes=1, max_nodes=2)
    group.next_rendezvous()  # alone: a round of one after the 1 s last call
    group._stop_heartbeats()  # its keep-alive thread would put its state back first: lose the race here
    store.restart()
    newcomer = ours(store, run_id, handlers, min_nodes=1, max_nodes=2)
    newcomer._state_holder.sync()  # what its join does first: it finds no state and starts one ...
    newcomer._op_executor.run(rendezvous_join_until_participant(newcomer), time.monotonic() + 10)
    assert newcomer._this_node in stored_state(store, run_id).participants
    time.sleep(1.1)
    assert group.num_nodes_waiting() == 1  # torch's agent restarts its workers and joins the next round
    assert group._this_node not in stored_state(store, run_id).participants  # nothing was overwritten


def rendezvous_join_until_participant(handler):
    """torch's join operation, stopped once the node is a participant (the round still forming)."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _Action, _RendezvousJoinOp

    join = _RendezvousJoinOp()

    def step(ctx, deadline):
        return _Action.FINISH if ctx.node in ctx.state.participants else join(ctx, deadline)

    return step


def test_a_stalled_store_keeps_its_data_and_every_heartbeat_is_renewed(store, run_id, handlers):
    """SIGSTOP: the store keeps its data but answers nothing for longer than a node may stay silent
    (keep_alive_interval x keep_alive_max_attempt). torch's sanitizer would then drop every node;
    the first call after the stall renews the heartbeats instead.

    4 s alive, not 2: the node's last heartbeat must count as alive at the store's last answer before
    the stall, and a loaded machine can hold the keep-alive thread between the two for over a second."""
    handler = ours(store, run_id, handlers, keep_alive_interval=1, keep_alive_max_attempt=4)
    handler.next_rendezvous()
    store.pause()
    try:
        time.sleep(6)
    finally:
        store.resume()
    time.sleep(1.1)
    assert handler.num_nodes_waiting() == 0
    state = stored_state(store, run_id)
    assert handler._this_node in state.participants and state.complete


def test_past_the_bound_it_gives_up_naming_the_store_and_leaves_the_rendezvous_open(store, run_id, handlers):
    clock = [1000.0]
    handler = ours(store, run_id, handlers, store_outage_timeout=5)
    handler.next_rendezvous()
    handler._store_outage.clock = lambda: clock[0]
    handler._store._sleep = lambda seconds: clock.__setitem__(0, clock[0] + 10)  # every try: 10 s later
    store.kill()
    try:
        time.sleep(1.1)
        with pytest.raises(store_client.StoreUnavailable) as raised:
            handler.num_nodes_waiting()
    finally:
        store.restart()
    message = str(raised.value)
    assert "\n" not in message
    assert f"the rendezvous store {store.endpoint} was unreachable for 10.0 s" in message
    assert "longer than store_outage_timeout=5 s" in message
    assert handler.shutdown() is False  # torch would close it here (launcher/api.py launch_agent)
    with pytest.raises(store_client.StoreUnavailable):
        handler.num_nodes_waiting()  # given up for good: at once, without trying again


def test_a_new_agent_waits_for_a_store_that_is_not_there_yet(store, run_id, handlers):
    """A recreated pod that starts while the store is still away: torch's c10d backend fails while
    it is created; ours waits for it, within the bound."""
    store.kill()
    with pytest.raises(RendezvousConnectionError):
        torch_c10d_backend(parameters(store.endpoint, run_id, read_timeout=1, is_host=False))
    handler = ours(store, run_id, handlers)
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            store.restart()

    handler._store._sleep = sleep
    assert handler.next_rendezvous().world_size == 1
    assert sleeps == [store_client.PROBE_SECONDS] * 2


def test_a_normal_shutdown_closes_the_rendezvous_as_torch_does(store, run_id, handlers):
    handler = ours(store, run_id, handlers)
    handler.next_rendezvous()
    assert handler.shutdown() is True
    assert stored_state(store, run_id).closed and handler.is_closed()


def test_a_store_restarted_between_the_record_and_the_close_still_says_the_run_finished(store, run_id, handlers):
    """Review rdzv-1 item 5: the finishing agent records RunEnd, the store restarts empty, then its
    close puts its state back, closed. Before: the record was gone with the old store, so a late
    agent found a rendezvous closed without one (ClosedWithoutFinishing: exit 3 after a finished run).
    Now the closed state carries the record, and the late agent arrived after the end (exit 0)."""
    finisher = ours(store, run_id, handlers)
    finisher.next_rendezvous()
    record_end = finisher._run_backend.record_end

    def record_then_lose_the_store(end):
        record_end(end)
        store.restart()  # the store pod replaced: empty

    finisher._run_backend.record_end = record_then_lose_the_store
    assert finisher.shutdown() is True
    assert stored_state(store, run_id).closed
    late = ours(store, run_id, handlers)
    with pytest.raises(rendezvous.ArrivedAfterTheEnd, match=r"has finished \(node 127\.0\.0\.1_.*round 0"):
        late.next_rendezvous()


def test_a_node_that_re_joins_after_its_group_finished_did_not_finish(store, run_id, handlers):
    """Review rdzv-1 item 9a: nodes A and B train in round 0 (--nnodes=2:2); B's workers finish, B
    records RunEnd and closes; A's workers then fail (rank 0's final save, say, outlasting B's exit
    barrier) and torch's agent re-joins. Before: "arrived after the end", exit 0, as if A's workers had
    finished. Now RejoinedAfterTheEnd (jobs.elastic.torchrun: exit 3), naming A's round."""
    a, b = (ours(store, run_id, handlers, min_nodes=2, max_nodes=2) for _ in range(2))
    rounds = {}
    threads = [
        threading.Thread(target=lambda h=h, n=n: rounds.__setitem__(n, h.next_rendezvous()))
        for n, h in (("a", a), ("b", b))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(rounds) == ["a", "b"] and rounds["a"].world_size == 2, rounds
    assert b.shutdown() is True  # B's run finished: RunEnd, then torch's close
    with pytest.raises(rendezvous.RejoinedAfterTheEnd, match=r"re-joined it after its workers of round 0 stopped"):
        a.next_rendezvous()
    late = ours(store, run_id, handlers, min_nodes=2, max_nodes=2)
    with pytest.raises(rendezvous.ArrivedAfterTheEnd):  # a node that never trained in it: still 0
        late.next_rendezvous()


def test_the_handler_s_timeouts_are_ours_unless_the_command_line_says_otherwise(store, run_id, handlers):
    handler = rendezvous.create_handler(RendezvousParameters(rendezvous.BACKEND, store.endpoint, run_id, 1, 1))
    handlers.append(handler)
    settings = handler.settings
    # Survivors wait for a replacement at least as long as it may take to come (issue 36 item 4):
    # the Job controller's longest re-creation delay, then the training wait's bound on a pending worker.
    assert settings.timeout.join == timedelta(seconds=600 + CAPACITY_WAIT_SECONDS) == timedelta(minutes=40)
    assert (settings.timeout.last_call, settings.keep_alive_interval, settings.keep_alive_max_attempt) == (
        timedelta(seconds=rendezvous.DEFAULTS["last_call_timeout"]),
        timedelta(seconds=rendezvous.DEFAULTS["keep_alive_interval"]),
        rendezvous.DEFAULTS["keep_alive_max_attempt"],
    )
    assert ours(store, run_id, handlers, last_call_timeout=7).settings.timeout.last_call == timedelta(seconds=7)
    assert os.environ[rendezvous.SHARE_STORE_VARIABLE] == "1"  # fact 10
    with pytest.raises(ValueError, match="keep_alive_interval=0: must be a whole number of seconds above 0"):
        ours(store, run_id, handlers, keep_alive_interval=0)


def test_after_a_stall_only_the_heartbeats_of_nodes_alive_before_it_are_renewed(store, run_id, handlers):
    """Issue 36 item 7. Before, every heartbeat in the state was renewed as of the store's return, so a
    node that was dead before the stall (its heartbeat stale, not yet dropped) came back as a participant
    for another keep_alive_interval x keep_alive_max_attempt. Now only those fresh when the store last
    answered are renewed.

    A heartbeat counts as alive for keep_alive_interval x keep_alive_max_attempt before the store's last
    answer: 20 s here, not 2, so that a loaded machine's delay between planting this node's heartbeat and
    that answer (once over 2 s under the test command's three workers) cannot make it look dead."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc

    handler = ours(store, run_id, handlers, keep_alive_interval=5, keep_alive_max_attempt=4)
    handler.next_rendezvous()
    handler._stop_heartbeats()  # this test writes the state itself
    client = dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=5))
    key = f"torch.rendezvous.{run_id}"
    value = client.compare_set(key, rendezvous.MISSING, rendezvous.MISSING)
    state = pickle.loads(b64decode(value))
    now = datetime.now(timezone.utc)
    dead = _NodeDesc("10.0.0.9", 1, 0)
    state.participants[dead] = 1
    state.last_heartbeats[dead] = now - timedelta(seconds=60)
    state.last_heartbeats[handler._this_node] = now
    planted = b64encode(pickle.dumps(state))
    assert client.compare_set(key, value, planted) == planted
    backend = handler._run_backend
    backend.get_state()  # the store answers: the time before the stall
    store.pause()
    resume = threading.Timer(3, store.resume)
    resume.start()
    try:
        backend.get_state()  # waits through the stall; the store answers again after 3 s
    finally:
        resume.join()
    after = stored_state(store, run_id)
    assert after.last_heartbeats[handler._this_node] > now + timedelta(seconds=2)  # renewed
    assert after.last_heartbeats[dead] == now - timedelta(seconds=60)  # dead before the stall: left as it was
