"""torchrun's etcd rendezvous, made to outlast an outage of the store (etcd) it runs on.

What torch 2.13.0 does when etcd goes away (torch/distributed/elastic/...):
- The agent's monitor loop (agent/server/api.py `_invoke_run`) asks the rendezvous every
  `--monitor-interval` (0.1 s) how many nodes wait to join (`num_nodes_waiting`), which reads the
  round's state from etcd (rendezvous/etcd_rendezvous.py `get_rdzv_state`). With etcd down,
  python-etcd raises EtcdConnectionFailed, the exception leaves `run`, the agent stops its workers
  and torchrun exits 1, which the TorchElastic controller never retries (jobs/agent.py). Yet the
  workers never needed etcd: they talk over the process group, whose store is a TCPStore on rank
  0's worker (MASTER_ADDR/MASTER_PORT, rendezvous/api.py RendezvousStoreInfo.build).
- An etcd that comes back empty has lost the run's keys, among them `version_counter`, which
  `EtcdRendezvous.__init__` created once: the next round's `try_create_rendezvous` then raises
  RendezvousError("... worker needs to die"), which nobody retries.
- The lease threads (`setup_lease_renewal`) die on the first failed refresh, so after an outage
  the round's keep-alive keys expire (10 s TTL): a node that arrives later sees them missing,
  destroys the round and opens a new one, in which the old group does not take part (torch's
  `num_nodes_waiting` counts waiting nodes only while the state is the old "final" one): with
  `--nnodes=1:N` the newcomer would train alone beside the old group, on the same run directory.

So this handler, registered as BACKEND and used by jobs.torchrun in place of "etcd":
- keeps the workers training while the store is unreachable, for at most `store_outage_timeout`
  seconds (`--rdzv_conf store_outage_timeout=S`; default STORE_OUTAGE_TIMEOUT), probing it every
  PROBE_SECONDS instead of 10 times a second; past that it raises StoreUnavailable, which
  jobs.torchrun turns into the retryable exit code 138;
- builds torch's EtcdRendezvous afresh for every round, which recreates the run's keys when the
  store lost them (each of its writes is create-if-missing);
- asks the group to re-form (returns 1 from `num_nodes_waiting`) when the store holds a round
  that is not the group's own: the store lost the group's state and someone started another.
  A store that holds no round at all is left alone: the group keeps training, and a node that
  comes later opens a round, which this rule then joins;
- never closes the rendezvous on the way out because of the store (torch closes it in
  launcher/api.py `launch_agent` on any exception: the recreated pods could never rejoin).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import etcd
from torch.distributed.elastic.rendezvous import (
    RendezvousError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
    RendezvousTimeoutError,
    rendezvous_handler_registry,
)
from torch.distributed.elastic.rendezvous import etcd_rendezvous as torch_etcd

BACKEND = "etcd-outlasting"
# Seconds. Longer than etcd takes to come back on another node when its own died (about 7 minutes:
# docs/design-notes.md, "Rendezvous store"), shorter than the training wait's bound on a store
# without a ready pod (15 minutes: infra/components/rendezvous_health.py).
STORE_OUTAGE_TIMEOUT = 600
PROBE_SECONDS = 2.0  # how often an unreachable store is tried again
STATE_LOSSES = 3  # rounds started again in a row because the store lost the run's keys, at most
OUTAGE_KEY = "store_outage_timeout"
# Beside torch's keys in a round's directory (/rdzv/v_N/: rank_R keep-alives, extra_data, kv/),
# which torch only reads by their full names.
MARKER_PREFIX = "outlasting_"


class StoreUnavailable(Exception):
    """The rendezvous store stayed unreachable for longer than the bound; the message is one line."""


def store_failure(error: BaseException) -> bool:
    """Whether python-etcd's exception means "the store did not answer" rather than an answer.

    python-etcd 0.4.5 (etcd/client.py) raises EtcdConnectionFailed when a request fails,
    EtcdException itself when the client cannot list the members while it is created
    (`machines`), EtcdClusterIdChanged once when a different etcd answers on the address, and
    EtcdLeaderElectionInProgress while a cluster has no leader. Key and value errors are answers."""
    return isinstance(error, etcd.EtcdException) and not isinstance(error, (etcd.EtcdKeyError, etcd.EtcdValueError))


def say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} jobs.rendezvous: {message}", file=sys.stderr, flush=True)


@dataclass
class Outage:
    """Since when the store has been unreachable, and the bound after which we give up."""

    endpoint: str
    bound_seconds: float
    clock: Callable[[], float] = time.monotonic
    since: float | None = None

    def note(self, error: BaseException) -> None:
        """One more failed call; raises StoreUnavailable once the outage is longer than the bound."""
        now = self.clock()
        if self.since is None:
            self.since = now
            say(f"the rendezvous store {self.endpoint} is unreachable ({type(error).__name__}); the workers "
                f"keep training; giving up after {self.bound_seconds:.0f} s")
        if now - self.since > self.bound_seconds:
            raise StoreUnavailable(
                f"the rendezvous store {self.endpoint} (etcd) was unreachable for {now - self.since:.0f} s, longer "
                f"than {OUTAGE_KEY}={self.bound_seconds:.0f} s ({type(error).__name__}: {error})")

    def end(self) -> None:
        if self.since is not None:
            say(f"the rendezvous store {self.endpoint} answers again after {self.clock() - self.since:.1f} s")
        self.since = None

    @property
    def ongoing(self) -> bool:
        return self.since is not None


@dataclass(frozen=True)
class Round:
    """The rendezvous round this agent's group formed: its version, and a key this agent wrote
    into the round's directory when it closed.

    After the store comes back empty, a node that opens a round writes the same keys in the same
    order as the first round did: same version number, same keep-alive key names, even the same
    etcd createdIndex (seen in tests/jobs/test_rendezvous_store.py). Only a key of our own tells
    the group's round from that one."""

    version: str
    marker: str

    def is_this(self, state: dict) -> bool:
        return state.get("status") == "final" and state.get("version") == self.version


class OutlastingEtcdRendezvousHandler(RendezvousHandler):
    """torch's etcd rendezvous (EtcdRendezvous, driven through its public methods) that survives
    its store going away; see the module docstring."""

    def __init__(self, params: RendezvousParameters, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self._params = params
        self._sleep, self._clock = sleep, clock
        self._outage = Outage(params.endpoint, params.get_as_int(OUTAGE_KEY, STORE_OUTAGE_TIMEOUT), clock)
        self._rdzv: torch_etcd.EtcdRendezvous | None = None  # of the last round that formed
        self._round: Round | None = None
        self._next_probe = 0.0
        self._gave_up = False
        self._reforming = False

    # --- RendezvousHandler -------------------------------------------------------------------

    def get_backend(self) -> str:
        return BACKEND

    def get_run_id(self) -> str:
        return self._params.run_id

    def next_rendezvous(self) -> RendezvousInfo:
        losses = 0
        while True:
            try:
                return self._form_round()
            except RendezvousTimeoutError:
                # torch's barrier retries a failing store itself, until its own timeout (the
                # `timeout` rdzv_conf: 900 s under torchrun, launcher/api.py LaunchConfig); then
                # only the store can say why.
                if self._store_reachable():
                    raise  # too few nodes came: torch's verdict stands
                self._gave_up = True
                raise StoreUnavailable(f"the rendezvous store {self._params.endpoint} (etcd) was unreachable "
                                       f"when the rendezvous round timed out") from None
            except RendezvousError as error:
                if not isinstance(error.__cause__, etcd.EtcdKeyNotFound) or losses >= STATE_LOSSES:
                    raise
                # try_create_rendezvous found the run's version counter gone: the store lost its
                # data during the round. A fresh EtcdRendezvous writes the counter again.
                losses += 1
                say("the rendezvous store lost this run's keys during the round; starting the round again")
                self._sleep(PROBE_SECONDS)
            except Exception as error:
                if not store_failure(error):
                    raise
                self._note_failure(error)
                self._sleep(PROBE_SECONDS)

    def num_nodes_waiting(self) -> int:
        if self._rdzv is None or self._round is None:
            return 0
        now = self._clock()
        if self._outage.ongoing and now < self._next_probe:
            return 0
        self._next_probe = now + PROBE_SECONDS
        try:
            _, state = self._rdzv.get_rdzv_state()
            ours = self._round.is_this(state) and self._marker_present()
        except etcd.EtcdKeyNotFound:
            # The store answers but holds no round: it came back empty (or the run's keys expired).
            # The group keeps training; a node that comes later opens a round, seen below.
            self._outage.end()
            return 0
        except Exception as error:
            if not store_failure(error):
                raise
            self._note_failure(error)
            return 0
        self._outage.end()
        if ours:
            return state.get("num_workers_waiting", 0)
        if state.get("status") == "closed":
            return 0  # as torch: the run is over; the workers finish or fail on their own
        if not self._reforming:
            say(f"the rendezvous store holds a round other than this group's ({state.get('status')}, version "
                f"{state.get('version')}): re-forming the group from the last checkpoint")
            self._reforming = True
        return 1  # torch's agent restarts its workers and joins the next round (membership change)

    def is_closed(self) -> bool:
        try:
            _, state = self._rendezvous().get_rdzv_state()
        except etcd.EtcdKeyNotFound:
            return False
        return state["status"] == "closed"

    def set_closed(self) -> None:
        self._rendezvous().set_closed()

    def shutdown(self) -> bool:
        """Close the rendezvous (so that the other agents stop), as torch does, except when we stop
        because of the store: a closed rendezvous would turn every recreated pod away."""
        if self._gave_up:
            say("leaving the rendezvous open for the recreated workers")
            return False
        try:
            self.set_closed()
            return True
        except etcd.EtcdKeyNotFound:
            return True  # the store lost the round: nothing left to close
        except Exception as error:
            say(f"could not close the rendezvous ({type(error).__name__}: {error})")
            return False

    # --- internals ---------------------------------------------------------------------------

    def _rendezvous(self) -> torch_etcd.EtcdRendezvous:
        """The EtcdRendezvous of the last round, or a new one (it creates the run's keys)."""
        if self._rdzv is None:
            self._rdzv = _new_etcd_rendezvous(self._params)
        return self._rdzv

    def _form_round(self) -> RendezvousInfo:
        # What torch's EtcdRendezvousHandler.next_rendezvous does, on a fresh EtcdRendezvous, plus
        # remembering the round so that num_nodes_waiting can tell it from another.
        self._rdzv = None
        rdzv = self._rendezvous()
        version, rank, world_size = rdzv.rendezvous_barrier()
        store = rdzv.setup_kv_store(version)
        store_info = RendezvousStoreInfo.build(rank, store, local_addr=self._params.local_addr)
        marker = rdzv.get_path(f"/rdzv/v_{version}/{MARKER_PREFIX}{uuid.uuid4().hex}")
        rdzv.client.write(marker, self._params.local_addr or "")
        self._round = Round(version, marker)
        self._outage.end()
        self._reforming = False
        return RendezvousInfo(store, rank, world_size, store_info)

    def _marker_present(self) -> bool:
        try:
            self._rdzv.client.get(self._round.marker)
        except etcd.EtcdKeyNotFound:
            return False
        return True

    def _store_reachable(self) -> bool:
        try:
            self._rendezvous().get_rdzv_state()
        except etcd.EtcdKeyNotFound:
            return True
        except Exception as error:
            if store_failure(error):
                return False
            raise
        return True

    def _note_failure(self, error: BaseException) -> None:
        try:
            self._outage.note(error)
        except StoreUnavailable:
            self._gave_up = True
            raise


def _new_etcd_rendezvous(params: RendezvousParameters) -> torch_etcd.EtcdRendezvous:
    """torch's EtcdRendezvous for these parameters, built the way torch builds it (client, prefix,
    timeouts, TLS: etcd_rendezvous.create_rdzv_handler); its handler has no accessor for it."""
    return torch_etcd.create_rdzv_handler(params)._rdzv_impl


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    return OutlastingEtcdRendezvousHandler(params)


def register() -> None:
    """Make BACKEND known to torchrun in this process (idempotent: the registry accepts the same
    creator twice, rendezvous/api.py RendezvousHandlerRegistry.register)."""
    rendezvous_handler_registry.register(BACKEND, create_handler)
