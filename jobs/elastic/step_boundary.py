"""Moved to elastic_training.step_boundary (issue 38): the library a training script imports and the CIFAR-10
job share one implementation; this name stays for the code and docs that use it."""

from elastic_training.step_boundary import StepBoundary  # noqa: F401
