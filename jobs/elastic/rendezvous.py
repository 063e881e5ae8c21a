"""torch's dynamic rendezvous on our rendezvous store (jobs.elastic.store_server), made to outlast the store.

It is over 400 lines because torch's handler, our backend on the reconnecting store and the record of how a run
ended are one protocol: each part reads the others' keys and states, and split they would import each other.

    torchrun --rdzv_backend=reconnecting-c10d --rdzv_endpoint=HOST:PORT ...

The algorithm is torch 2.13.0's maintained one, DynamicRendezvousHandler
(torch/distributed/elastic/rendezvous/dynamic_rendezvous.py): each node keeps the round's state
(participants, wait list, heartbeats) in one key of the store and changes it by compare-and-set.
What is ours (registered as BACKEND through torchrun's `torchrun.handlers` entry point, in
pyproject.toml and jobs/elastic/rendezvous_plugin.py, and by jobs.elastic.torchrun in its own process):

- the store's client, jobs.elastic.store_client.ReconnectingStore: it connects again after the store
  restarted, and raises StoreUnavailable (exit 138) only past `store_outage_timeout`;
- ReseedingBackend, in place of torch's C10dRendezvousBackend, which reads a missing key as a
  stale state (`TCPStore.compare_set` on a missing key returns the expected value and writes
  nothing: upstream-facts-3.md fact 9). An emptied store (a restarted store pod) gets back this
  node's last state, so the group stays one group; a node that has none (a new pod) starts a state
  as torch does. After any outage or stall the heartbeats of the nodes that were alive when the
  store last answered are renewed once: nobody could write one meanwhile, and torch's sanitizer
  would otherwise drop every node whose heartbeat is older than keep_alive_interval x
  keep_alive_max_attempt, the living ones included (a node dead before the outage is not revived);
- OutlastingRendezvousHandler, torch's handler plus these rules: a node that is no longer a
  participant of the round it trains in (another node started a state on the emptied store before
  the group put its own back: the newcomer race) asks its group to re-form, by reporting a node
  waiting, as torch's agent does for a newcomer; the rendezvous is closed only when this agent's
  run finished, with a record saying so (RunEnd): torch closes it in launcher/api.py `launch_agent`
  after a failed group too (upstream-facts-4 fact 1), and its `closed` cannot say which, so a
  failed run ended Succeeded (issue 36). A failed agent, or one that gave up on the store, leaves
  the rendezvous open: the survivors go on without it and the Job's retry of its worker joins
  again. An agent that finds the rendezvous closed exits 0 only when the record says the run
  finished (ArrivedAfterTheEnd), 3 otherwise (ClosedWithoutFinishing), and 3 when it trained in it
  and re-joined, its workers stopped without finishing (RejoinedAfterTheEnd);
- TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torch's shared store (`_bootstrap_store_info`, cached across
  rounds) breaks a node joining a running group and the loss of rank 0's node (fact 10);
- our default timeouts (DEFAULTS), which a `--rdzv_conf` key overrides; docs/design-notes.md says
  why each.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from base64 import b64decode, b64encode
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from torch.distributed.elastic.rendezvous.api import (
    RendezvousClosedError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStateError,
)
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    DynamicRendezvousHandler,
    RendezvousBackend,
    RendezvousTimeout,
    Token,
)
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

from jobs.elastic.store_client import Outage, ReconnectingStore, StoreUnavailable, say

BACKEND = "reconnecting-c10d"
DEFAULT_PORT = 29400  # torch's c10d backend's port (c10d_rendezvous_backend.py DEFAULT_PORT): the store's
OUTAGE_KEY = "store_outage_timeout"
# Seconds. Longer than a store pod takes to come back on another system node when its own died
# (docs/design-notes.md, "Rendezvous store"), shorter than the training wait's bound on a store
# without a ready pod (15 minutes: infra/components/rendezvous_health.py).
STORE_OUTAGE_TIMEOUT = 600
# Seconds a read waits for a key that is not there yet (torch's c10d backend: read_timeout, 60).
READ_TIMEOUT = 60
# The rendezvous timeouts, `--rdzv_conf` keys of torch's create_handler, in seconds (torch's
# defaults: join 600, last call 30, close 30, heartbeat 5, keep-alive every 5 s, 3 missed = dead).
# A node lost without notice is noticed keep_alive_interval x keep_alive_max_attempt after its last
# heartbeat (6 s), and the survivors' round closes last_call after the minimum is there (5 s): with
# the workers' start that is under 20 s here. A node that brings the group to maxWorkers closes the
# round at once, whatever the last call. docs/design-notes.md, "Rendezvous timeouts".
# join_timeout: how long nodes below the minimum wait for more (survivors for a replacement). No
# shorter than the longest a replacement can take to come: the Job controller's longest delay
# before it re-creates a failed index's pod (600 s, MaxJobPodFailureBackOff; it counts failures the
# pod failure policy ignores: upstream-facts-4 fact 9), plus the longest the training wait lets a
# worker wait for a node (CAPACITY_WAIT_SECONDS in infra/components/scheduling.py, 30 minutes; a
# test compares the two). A survivor that timed out would exit 1 and use one of its own retries.
JOB_MAX_RECREATION_DELAY = 600
CAPACITY_WAIT = 30 * 60
DEFAULTS = {
    "join_timeout": JOB_MAX_RECREATION_DELAY + CAPACITY_WAIT,
    "last_call_timeout": 5,
    "close_timeout": 30,
    "heartbeat_timeout": 5,
    "keep_alive_interval": 2,
    "keep_alive_max_attempt": 3,
}
SHARE_STORE_VARIABLE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
# torch's private members this module uses (upstream-facts-4 fact 4): DynamicRendezvousHandler's, and the
# fields of _RendezvousState it reads or rewrites. torch is pinned exactly (pyproject.toml);
# tests/jobs/test_torch_internals.py names any a torch lacks, and fails when this module uses one not listed.
TORCH_HANDLER_INTERNALS = ("_settings", "_state_holder", "_stop_heartbeats", "_this_node")
TORCH_STATE_FIELDS = ("closed", "last_heartbeats", "participants", "round")
# compare_set(key, MISSING, MISSING) reads a key without blocking: on a missing key it returns
# MISSING and writes nothing; an existing key is returned as it is. Never a base64 state.
MISSING = "<no rendezvous state>"


FINISHED = "finished"  # the one outcome an agent of ours closes a rendezvous with
# The RunEnd carried in the closed state itself, an attribute torch's _RendezvousState does not have
# (pickle keeps it; torch never reads it): a store restarted between the record and the close would
# otherwise keep the closed state, put back by the finishing agent, without the record (review rdzv-1 item 5).
STATE_RUN_END = "elastic_training_run_end"


@dataclass(frozen=True)
class RunEnd:
    """Why a rendezvous was closed, in a key of its own beside torch's state, whose `closed` is one
    bool for "finished" and "failed" (upstream-facts-4 fact 3). The agent whose run finished writes
    it just before it closes the rendezvous; an agent that finds the rendezvous closed reads it."""

    outcome: str
    node: str  # torch's node descriptor: address_pid_localid
    round: int
    at: str  # UTC, ISO 8601

    @staticmethod
    def key(run_id: str) -> str:
        # Not a key of any round's store (torch's `torch.rendezvous.<run id>.<round>/...`).
        return f"torch.rendezvous.{run_id}.end"

    def text(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def parse(cls, value: bytes) -> RunEnd | None:
        """None for what no agent of ours wrote: such a close says nothing about the run."""
        try:
            fields = json.loads(value)
            return cls(str(fields["outcome"]), str(fields["node"]), int(fields["round"]), str(fields["at"]))
        except (ValueError, TypeError, KeyError):
            return None


class ArrivedAfterTheEnd(Exception):
    """The rendezvous was closed, and its RunEnd says the run finished, before this node joined a
    round of it (a replacement let in late, say; one that re-joins is RejoinedAfterTheEnd). torch's join raises
    RendezvousClosedError (dynamic_rendezvous.py `_RendezvousJoinOp`), which its launcher prints as
    a traceback and exit 1, a failure the Job would count; jobs.elastic.torchrun exits 0 with this
    line instead: nothing is left for this node to do."""


class ClosedWithoutFinishing(Exception):
    """The rendezvous is closed and no agent recorded that its run finished: torch's own handler
    closed it (an agent without this backend, or of an image before it, closes after a failed group
    too: upstream-facts-4 fact 1), or someone called `set_closed`. A closed rendezvous never opens
    again while the store keeps it, so jobs.elastic.torchrun exits 3 (a retry cannot help:
    jobs/exit_codes.py) with this line, never 0: the run did not finish."""


class RejoinedAfterTheEnd(Exception):
    """This node trained in a round, then its workers stopped (they failed, or were restarted for a
    node that was waiting) and it re-joined the rendezvous, which the group had closed as finished
    meanwhile (review rdzv-1 item 9a). Its workers did not finish: rank 0's final save or evaluation
    may be what failed, outlasting the others' exit barrier. jobs.elastic.torchrun exits 3 with this
    line, not 0 (a retry would only find the run over and exit 0); whether the run itself finished is
    for its history, not this node, to say."""


class SpareNotAdmitted(Exception):
    """The rendezvous closed without a record that its run finished while this node waited as a
    spare: the group was full. (A spare of a finished run ends as ArrivedAfterTheEnd, exit 0: an
    exit 3 would fail its index beside the group's succeeded ones.)

    torch 2.13.0 turns this case (a node in the redundancy list when the rendezvous closes:
    dynamic_rendezvous.py `_RendezvousJoinOp` raises RendezvousGracefulExitError) into a crash of its
    launcher (launcher/api.py `launch_agent` calls `is_failed()` on the None that agent.run returned),
    exit 1, which a controller would retry for ever; jobs.elastic.torchrun exits 3 with this line."""


class ReseedingBackend(RendezvousBackend):
    """The round's state in one key of the store, put back from this node's last state when the
    store lost it (see the module docstring). States are base64 text; the token is that text."""

    def __init__(
        self, store: ReconnectingStore, run_id: str, alive_for: timedelta, clock=lambda: datetime.now(timezone.utc)
    ):
        if not run_id:
            raise ValueError("The run id must be a non-empty string.")
        self._store = store
        self._key = f"torch.rendezvous.{run_id}"  # the key torch's c10d backend uses
        self._end_key = RunEnd.key(run_id)
        # How long a heartbeat keeps a node in the rendezvous (keep_alive_interval x
        # keep_alive_max_attempt: torch's _BackendRendezvousStateHolder._sanitize).
        self._alive_for = alive_for
        self._clock = clock
        self._last: bytes | None = None  # the last state this node read or wrote, base64
        self._end: RunEnd | None = None  # the end this node recorded: carried in every closed state it writes

    @property
    def name(self) -> str:
        return BACKEND

    def get_state(self) -> tuple[bytes, Token] | None:
        value = self._store.compare_set(self._key, MISSING, MISSING)
        answered = self._store.recovered()
        if value == MISSING.encode():
            if self._last is None:
                return None  # a new rendezvous, or a new node on an emptied store: torch starts a state
            value = self._reseed(self._last, answered or self._clock())
        elif answered:
            value = self._renew_heartbeats(value, answered)
        return self._decoded(value)

    def set_state(self, state: bytes, token: Token | None = None) -> tuple[bytes, Token, bool] | None:
        desired = b64encode(self._with_end(state))
        expected = token if isinstance(token, bytes) else b""  # b"": only if there is no state yet
        value = self._store.compare_set(self._key, expected, desired)
        if expected and value == expected != desired:
            # On a missing key compare_set returns the expected value and writes nothing: the store
            # lost the state since we read it. Ours is the newest the group had: put it back.
            value = self._store.compare_set(self._key, b"", desired)
            if value == desired:
                _said_put_back(desired)
        answered = self._store.recovered()
        if answered:
            value = self._renew_heartbeats(value, answered)
        state_bits, new_token = self._decoded(value)
        return state_bits, new_token, value == desired

    # --- internals ---------------------------------------------------------------------------

    def _reseed(self, last: bytes, answered: datetime) -> bytes:
        seed = self._with_fresh_heartbeats(last, answered)
        value = self._store.compare_set(self._key, b"", seed)  # another node may have been first
        if value == seed:
            _said_put_back(seed)
        self._store.recovered()  # the heartbeats are renewed already
        return value

    def _renew_heartbeats(self, value: bytes, answered: datetime) -> bytes:
        """After an outage: the heartbeats of the nodes that were alive when the store last answered
        renewed as of now, by compare-and-set (a few tries: the other nodes do the same at about the
        same time; one renewal is enough)."""
        for _ in range(5):
            renewed = self._with_fresh_heartbeats(value, answered)
            result = self._store.compare_set(self._key, value, renewed)
            if result == renewed:
                return result
            if result == value:  # the key is missing: the store was emptied in between
                return self._reseed(value, answered)
            value = result
        return value

    def _with_fresh_heartbeats(self, value: bytes, answered: datetime) -> bytes:
        """Nobody could write a heartbeat while the store was away, so torch's sanitizer would drop
        every node, the living ones included: renew those whose heartbeat was fresh when the store
        last answered (`answered`). A node that was dead already keeps its old heartbeat, and is
        dropped as it would have been without the outage."""
        state = pickle.loads(b64decode(value))
        now = self._clock()
        alive_since = answered - self._alive_for
        state.last_heartbeats = {
            node: max(beat, now) if beat >= alive_since else beat for node, beat in state.last_heartbeats.items()
        }
        return b64encode(pickle.dumps(state))

    # --- how the run ended (RunEnd) -----------------------------------------------------------

    def record_end(self, end: RunEnd) -> None:
        self._end = end
        self._store.set(self._end_key, end.text())

    def read_end(self) -> RunEnd | None:
        """The record's key, else the one carried in the last state this node read (STATE_RUN_END)."""
        value = self._store.compare_set(self._end_key, MISSING, MISSING)  # read without waiting
        if value != MISSING.encode():
            return RunEnd.parse(value)
        carried = getattr(pickle.loads(b64decode(self._last)), STATE_RUN_END, None) if self._last else None
        return RunEnd.parse(carried) if carried is not None else None

    def _with_end(self, state: bytes) -> bytes:
        """A closed state this node writes after it recorded the end carries the record."""
        if self._end is None:
            return state
        decoded = pickle.loads(state)
        if not decoded.closed:
            return state
        setattr(decoded, STATE_RUN_END, self._end.text())
        return pickle.dumps(decoded)

    def _decoded(self, value: bytes) -> tuple[bytes, Token]:
        try:
            state = b64decode(value, validate=True)
        except ValueError as error:
            raise RendezvousStateError(f"the rendezvous state in the store is not base64 ({error})") from error
        self._last = value
        return state, value


def _said_put_back(value: bytes) -> None:
    state = pickle.loads(b64decode(value))
    say(
        f"the rendezvous store lost this run's state; put back this node's last one (round {state.round}, "
        f"{len(state.participants)} participants)"
    )


class OutlastingRendezvousHandler(DynamicRendezvousHandler):
    """torch's DynamicRendezvousHandler with the rules of the module docstring."""

    _round: int | None = None
    _reforming = False
    _store_outage: Outage
    _run_backend: ReseedingBackend

    @property
    def use_agent_store(self) -> bool:
        return False  # fact 10; torch reads the variable, which create_handler sets, for the rest

    def next_rendezvous(self) -> RendezvousInfo:
        try:
            info = super().next_rendezvous()
        except RendezvousClosedError:
            raise self._closed() from None
        except RendezvousGracefulExitError:
            end = self._run_backend.read_end()
            if end is not None and end.outcome == FINISHED:  # review rdzv-1 item 4: the spare of a finished run
                raise ArrivedAfterTheEnd(
                    f"the rendezvous {self._settings.run_id} closed while this node waited as a spare (its group was "
                    f"full at {self._settings.max_nodes} nodes): the group finished (node {end.node}, round {end.round}, "
                    f"{end.at}), so there is nothing left for this node to do"
                ) from None
            raise SpareNotAdmitted(
                f"the rendezvous {self._settings.run_id} closed while this node waited as a spare: its group was "
                f"full at {self._settings.max_nodes} nodes (--nnodes MIN:MAX admits no more agents than MAX)"
            ) from None
        self._round, self._reforming = self._state_holder.state.round, False
        return info

    def num_nodes_waiting(self) -> int:
        waiting = super().num_nodes_waiting()
        state = self._state_holder.state
        if self._round is None or (state.round == self._round and self._this_node in state.participants):
            return waiting
        if not self._reforming:
            say(
                f"this node is not in the rendezvous round it trains in any more (the store holds round "
                f"{state.round} with {len(state.participants)} participants): re-forming the group from the "
                "last checkpoint"
            )
            self._reforming = True
        return max(waiting, 1)  # torch's agent restarts its workers and joins the next round

    def _closed(self) -> Exception:
        """What a join that found the rendezvous closed means, from the run's RunEnd."""
        run_id = self._settings.run_id
        end = self._run_backend.read_end()
        if end is not None and end.outcome == FINISHED and self._round is not None:
            return RejoinedAfterTheEnd(
                f"the rendezvous {run_id} was closed as finished (node {end.node}, round {end.round}, {end.at}) while "
                f"this node re-joined it after its workers of round {self._round} stopped without finishing: the "
                "rest of the group finished without them"
            )
        if end is not None and end.outcome == FINISHED:
            return ArrivedAfterTheEnd(
                f"the rendezvous {run_id} was closed before this node joined it: the group it was to join has finished "
                f"(node {end.node}, round {end.round}, {end.at}), so there is nothing left for this node to do"
            )
        return ClosedWithoutFinishing(
            f"the rendezvous {run_id} is closed, and no agent recorded that its run finished (torch's own handler "
            "closes it after a failed group too): the run failed, this node cannot join it, and a retry cannot either"
        )

    def shutdown(self) -> bool:
        """Close the rendezvous only when this agent's run finished, saying so first (RunEnd).

        torch's launch_agent calls this in its `finally` (launcher/api.py, torch 2.13.0), so the
        exception that ends the agent's run is the one being handled here: ChildFailedError (its
        workers failed past --max_restarts), a rendezvous error; None when the run finished
        (tests/jobs/test_rendezvous_end.py shows both with real agents). Were an exception seen
        wrongly, the run would be left open, never claimed finished. A failed agent leaves the
        rendezvous open: the survivors re-form without it once its heartbeat is stale, and the Job's
        retry of its worker (backoffLimitPerIndex) joins again; the Job, not the rendezvous, decides
        when the run has failed."""
        ending = sys.exception()
        if self._store_outage.gave_up:
            say("leaving the rendezvous open for the recreated workers")
            self._stop_heartbeats()
            return False
        if ending is not None:
            if not isinstance(
                ending, (ArrivedAfterTheEnd, ClosedWithoutFinishing, RejoinedAfterTheEnd, SpareNotAdmitted)
            ):
                say(
                    f"leaving the rendezvous {self._settings.run_id} open ({type(ending).__name__}: this agent's run "
                    "failed; the others may go on, and this worker's retry can join again)"
                )
            self._stop_heartbeats()
            return False
        try:
            self._run_backend.record_end(
                RunEnd(
                    FINISHED,
                    repr(self._this_node),
                    self._state_holder.state.round,
                    datetime.now(timezone.utc).isoformat(),
                )
            )
        except RendezvousError as error:  # the store away past its bound: torch's close below fails alike
            say(f"could not record that the run finished ({error})")
        return super().shutdown()  # torch's: a RendezvousError is logged, the agent still ends as it finished


def _config(params: RendezvousParameters, key: str) -> int:
    value = params.get_as_int(key, DEFAULTS.get(key))
    if value is None or value <= 0:
        raise ValueError(f"--rdzv_conf {key}={params.get(key)}: must be a whole number of seconds above 0")
    return value


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    """The handler torchrun builds for `--rdzv_backend=BACKEND` (torch's create_handler, with our
    store, backend and default timeouts)."""
    os.environ[SHARE_STORE_VARIABLE] = "1"
    host, port = parse_rendezvous_endpoint(params.endpoint, default_port=DEFAULT_PORT)
    outage = Outage(f"{host}:{port}", _config(params, OUTAGE_KEY) if params.get(OUTAGE_KEY) else STORE_OUTAGE_TIMEOUT)
    read_timeout = params.get_as_int("read_timeout", READ_TIMEOUT)  # None only for a default of None
    store = ReconnectingStore(
        host, port, timedelta(seconds=READ_TIMEOUT if read_timeout is None else read_timeout), outage
    )
    keep_alive_interval, keep_alive_max_attempt = (
        _config(params, "keep_alive_interval"),
        _config(params, "keep_alive_max_attempt"),
    )
    backend = ReseedingBackend(store, params.run_id, timedelta(seconds=keep_alive_interval * keep_alive_max_attempt))
    timeout = RendezvousTimeout(
        *(timedelta(seconds=_config(params, f"{name}_timeout")) for name in ("join", "last_call", "close", "heartbeat"))
    )
    handler = OutlastingRendezvousHandler.from_backend(
        params.run_id,
        store,
        backend,
        params.min_nodes,
        params.max_nodes,
        params.local_addr,
        timeout,
        keep_alive_interval=keep_alive_interval,
        keep_alive_max_attempt=keep_alive_max_attempt,
    )
    handler._store_outage = outage
    handler._run_backend = backend
    return handler


__all__ = [
    "ArrivedAfterTheEnd",
    "BACKEND",
    "ClosedWithoutFinishing",
    "DEFAULT_PORT",
    "RejoinedAfterTheEnd",
    "RunEnd",
    "SpareNotAdmitted",
    "StoreUnavailable",
    "create_handler",
]
