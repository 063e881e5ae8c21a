"""When rank 0 asks for a checkpoint by time (jobs.training.progress.CheckpointClock), and how often the
workers vote at all (jobs.elastic.step_vote), in-process."""

from __future__ import annotations

from jobs.training import progress
from jobs.elastic import step_vote


def test_the_vote_goes_out_early_by_the_lookahead_so_saved_states_are_at_most_the_interval_apart():
    clock = progress.CheckpointClock(10.0)
    start = clock._last
    # the vote takes effect 3 s after it is cast: cast at 7 s or later, the state saved is at <= 10 s
    assert not clock.due(start + 6.9, lookahead=3.0)
    assert clock.due(start + 7.0, lookahead=3.0)
    assert not clock.due(start + 8.0, lookahead=3.0)  # voted once, not again while it is pending
    clock.saved(at=start + 10.0)  # the state reached at 10 s is on disk; its save took until 14 s
    assert not clock.due(start + 16.9, lookahead=3.0)  # the interval counts from the state, not the save
    assert clock.due(start + 17.0, lookahead=3.0)


def test_interval_zero_never_votes():
    clock = progress.CheckpointClock(0.0)
    assert not any(clock.due(clock._last + t, lookahead=0.0) for t in (1.0, 100.0, 1e6))


def test_the_gap_between_votes_is_about_a_quarter_second_of_steps():
    assert step_vote.proposed_gap(0.010) == 25  # 10 ms GPU steps: a vote every 25 steps
    assert step_vote.proposed_gap(0.4) == 1  # slow CPU steps: every step
    assert step_vote.proposed_gap(0.0) == 1 and step_vote.proposed_gap(1e-9) == step_vote.MAX_GAP


def test_alone_every_boundary_votes_and_the_outcome_is_the_vote_itself():
    vote = step_vote.StepVote()
    for stop, checkpoint in [(False, False), (False, True), (True, False)]:
        assert vote.is_voting_boundary()
        assert vote.collect() == step_vote.Outcome() and vote.steps_until_effect() == 0
        assert vote.cast(stop, checkpoint, gap=7) == step_vote.Outcome(stop, checkpoint, 1)


def test_time_left_reads_like_a_clock():
    assert progress.time_left(500, 100.0) == "about 5 s left"
    assert progress.time_left(24_500, 100.0) == "about 4 min 05 s left"
    assert progress.time_left(372_000, 100.0) == "about 1 h 02 min left"
    assert progress.time_left(0, 100.0) == "about 0 s left"
    assert progress.time_left(10, 0.0) == "time left unknown"


def test_every_progress_line_of_a_run_says_how_long_it_has_left(tiny_cifar, tmp_path, capsys):
    """`elastic-training local` shows jobs.training.train's log: the lines had a rate but no time left (issue 30,
    item 7). The estimate covers the rest of the run, so it shrinks to 0 at the last step."""
    import re

    from jobs.training import train

    assert train.main(["--data", str(tiny_cifar), "--run-dir", str(tmp_path / "run"), "--epochs", "2",
                       "--batch-size", "20", "--log-every", "1", "--checkpoint-every-seconds", "0"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).splitlines()
    steps = [line for line in lines if re.search(r"epoch \d/2 step ", line)]
    assert len(steps) == 10  # 100 images, batch 20, one worker: 5 steps per epoch
    left = [re.search(r", (about (?:(\d+) min )?(\d+) s left)$", line) for line in steps]
    assert all(left), steps
    assert steps[-1].endswith("about 0 s left")
    done = [line for line in lines if " done: " in line]
    assert re.search(r"checkpoint saved; about \d+ s left$", done[0]) and done[1].endswith("checkpoint saved"), done
