"""jobs.rendezvous against a real etcd (Debian's, v2 API) that is killed and started again on the
same address, empty or with its data: torch's own etcd handler next to ours, so a torch whose
etcd rendezvous changes shows here first. One node per round (min = max = 1: the round closes
as soon as it is joined) and a clock we move, so no test waits for a bound to pass.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import etcd
import pytest
from torch.distributed.elastic.rendezvous import RendezvousError, RendezvousParameters
from torch.distributed.elastic.rendezvous import etcd_rendezvous as torch_etcd
from torchrun_harness import EtcdServer

from jobs import rendezvous

# torch's lease threads (etcd_rendezvous.py setup_lease_renewal) die with EtcdConnectionFailed when
# a refresh meets the killed store: upstream behaviour the module docstring of jobs.rendezvous
# accounts for, reported by pytest as an unhandled thread exception.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def parameters(endpoint: str, run_id: str, **config) -> RendezvousParameters:
    return RendezvousParameters("etcd", endpoint, run_id, min_nodes=1, max_nodes=1, local_addr="127.0.0.1",
                                last_call_timeout=1, **config)  # fmt: skip


@pytest.fixture
def store(tmp_path):
    server = EtcdServer(tmp_path / "etcd").start()
    yield server
    server.stop()


@pytest.fixture
def run_id() -> str:
    return f"rdzv-{uuid.uuid4().hex[:8]}"


def ours(store: EtcdServer, run_id: str, clock: Clock, **config) -> rendezvous.OutlastingEtcdRendezvousHandler:
    return rendezvous.OutlastingEtcdRendezvousHandler(parameters(store.endpoint, run_id, **config),
                                                      sleep=lambda seconds: None, clock=clock)  # fmt: skip


def active_state(store: EtcdServer, run_id: str) -> dict | None:
    url = f"http://{store.endpoint}/v2/keys/torchelastic/p2p/run_{run_id}/rdzv/active_version"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(json.loads(response.read())["node"]["value"])
    except urllib.error.HTTPError as error:
        assert error.code == 404
        return None


def test_torch_s_own_handler_dies_on_an_outage_and_cannot_form_a_round_on_an_emptied_store(store, run_id):
    """Upstream, as the issue saw it: what jobs.rendezvous exists for."""
    handler = torch_etcd.create_rdzv_handler(parameters(store.endpoint, run_id))
    handler.next_rendezvous()
    store.kill()
    with pytest.raises(etcd.EtcdConnectionFailed):
        handler.num_nodes_waiting()  # what the agent's monitor loop calls every 0.1 s
    store.restart(keep_data=False)
    with pytest.raises(RendezvousError, match="worker needs to die") as raised:
        handler.next_rendezvous()  # the run's version counter went with the data
    assert isinstance(raised.value.__cause__, etcd.EtcdKeyNotFound)


def test_an_outage_within_the_bound_keeps_the_group_and_an_emptied_store_forms_new_rounds(store, run_id):
    clock = Clock()
    handler = ours(store, run_id, clock, store_outage_timeout=60)
    handler.next_rendezvous()
    assert handler.num_nodes_waiting() == 0
    store.kill()
    for _ in range(5):  # 50 s without the store, probed every PROBE_SECONDS
        clock.now += 10
        assert handler.num_nodes_waiting() == 0
    store.restart(keep_data=False)
    clock.now += 10
    assert handler.num_nodes_waiting() == 0  # answers, holds no round: keep training
    info = handler.next_rendezvous()  # e.g. after a worker failed: works on the emptied store
    assert (info.rank, info.world_size) == (0, 1)
    assert active_state(store, run_id)["status"] == "final"
    assert handler.num_nodes_waiting() == 0  # the new round is recognised as this group's


def test_a_round_the_group_is_not_in_makes_it_re_form(store, run_id):
    """After an empty restart another node opens a round with the same version number and the same
    keep-alive key names; only etcd's createdIndex tells it from the group's own."""
    clock = Clock()
    handler = ours(store, run_id, clock)
    handler.next_rendezvous()
    before = active_state(store, run_id)
    store.kill()
    store.restart(keep_data=False)
    newcomer = ours(store, run_id, Clock())
    newcomer.next_rendezvous()
    after = active_state(store, run_id)
    assert (after["version"], after["keep_alives"]) == (before["version"], before["keep_alives"])
    assert handler.num_nodes_waiting() == 1  # torch's agent restarts its workers and joins the next round


def test_a_store_restarted_with_its_data_keeps_the_group(store, run_id):
    clock = Clock()
    handler = ours(store, run_id, clock)
    handler.next_rendezvous()
    store.kill()
    clock.now += 10
    assert handler.num_nodes_waiting() == 0
    store.restart(keep_data=True)
    clock.now += 10
    assert handler.num_nodes_waiting() == 0
    assert active_state(store, run_id)["status"] == "final"


def test_past_the_bound_it_gives_up_naming_the_store_and_leaves_the_rendezvous_open(store, run_id):
    clock = Clock()
    handler = ours(store, run_id, clock, store_outage_timeout=30)
    handler.next_rendezvous()
    store.kill()
    assert handler.num_nodes_waiting() == 0
    clock.now += 31
    with pytest.raises(rendezvous.StoreUnavailable) as raised:
        handler.num_nodes_waiting()
    message = str(raised.value)
    assert "\n" not in message
    assert f"the rendezvous store {store.endpoint} (etcd)" in message and "store_outage_timeout=30" in message
    store.restart(keep_data=True)
    assert handler.shutdown() is False  # torch would close it here (launcher/api.py launch_agent)
    assert active_state(store, run_id)["status"] == "final"  # open: a recreated worker can join


def test_a_new_agent_waits_for_a_store_that_is_not_there_yet(store, run_id):
    """A recreated pod that starts while etcd is still away: torch's handler fails while it is
    created (python-etcd lists the members), ours only when the bound has passed."""
    store.kill()
    with pytest.raises(etcd.EtcdException):
        torch_etcd.create_rdzv_handler(parameters(store.endpoint, run_id))
    clock = Clock()
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds
        if len(sleeps) == 3:
            store.restart(keep_data=False)

    handler = rendezvous.OutlastingEtcdRendezvousHandler(parameters(store.endpoint, run_id), sleep=sleep, clock=clock)
    assert handler.next_rendezvous().world_size == 1
    assert sleeps == [rendezvous.PROBE_SECONDS] * 3


def test_a_normal_shutdown_closes_the_rendezvous_as_torch_does(store, run_id):
    handler = ours(store, run_id, Clock())
    handler.next_rendezvous()
    assert handler.shutdown() is True
    assert active_state(store, run_id)["status"] == "closed" and handler.is_closed()


@pytest.mark.parametrize("error, is_store_failure", [
    (etcd.EtcdConnectionFailed("No more machines in the cluster"), True),
    (etcd.EtcdException("Could not get the list of servers"), True),
    (etcd.EtcdClusterIdChanged("The UUID of the cluster changed"), True),
    (etcd.EtcdKeyNotFound("Key not found"), False),
    (etcd.EtcdCompareFailed("Compare failed"), False),
    (ValueError("not etcd"), False),
])  # fmt: skip
def test_which_python_etcd_errors_mean_the_store_did_not_answer(error, is_store_failure):
    assert rendezvous.store_failure(error) is is_store_failure
