"""jobs.progress.CheckpointClock: when rank 0 asks for a checkpoint by time (in-process, a fake clock)."""

from __future__ import annotations

import pytest

from jobs import progress


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    return now


def steps(timer: progress.CheckpointClock, now: list[float], seconds: float, count: int) -> list[bool]:
    votes = []
    for _ in range(count):
        now[0] += seconds
        votes.append(timer.due())
    return votes


def test_the_vote_goes_out_one_step_early_so_saved_states_are_at_most_the_interval_apart(clock):
    timer = progress.CheckpointClock(10.0)
    # steps of 3 s: at 9 s, 9 + 3 >= 10, so the vote goes out; the save is of the state at 12 s...
    assert steps(timer, clock, 3.0, 3) == [False, False, True]
    assert steps(timer, clock, 3.0, 1) == [False]  # ...voted once, not again while it is pending
    timer.saved()  # the state reached at 12 s is on disk
    assert steps(timer, clock, 3.0, 3) == [False, False, True]  # 21 s: 9 s after it, 12 >= 10
    # without the anticipation the vote would go out at 12 s after the last save, the save at 15 s


def test_interval_zero_never_votes(clock):
    timer = progress.CheckpointClock(0.0)
    assert not any(steps(timer, clock, 100.0, 5))


def test_the_interval_counts_from_the_state_saved_and_a_slow_save_is_no_step(clock):
    timer = progress.CheckpointClock(10.0)
    assert steps(timer, clock, 4.0, 3) == [False, True, False]  # voted at 8 s; the checkpoint: the state at 12 s
    clock[0] += 5.0  # the save takes 5 s
    timer.saved()
    # 1 s steps from 17 s: the vote goes out at 21 s (9 s after the state, + a 1 s step), the
    # state saved next is 10 s after the last; the 5 s of saving never counted as a step
    assert steps(timer, clock, 1.0, 4) == [False, False, False, True]
