"""Moved to elastic_training.step_vote (issue 38): the library a training script imports and the CIFAR-10
job share one implementation; this name stays for the code and docs that use it."""

from elastic_training.step_vote import MAX_GAP, VOTE_SECONDS, Outcome, StepVote, proposed_gap  # noqa: F401
