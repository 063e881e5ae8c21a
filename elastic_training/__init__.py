"""elastic_training: what the platform and any training code share, and a small library for training code.

The contract (no torch needed; the controller, jobs/ and infra/ import it):
    elastic_training.exit_codes     the exit-code table and what each code makes the platform do
    elastic_training.run_directory  the run directory's environment variables and file names
    elastic_training.history        the run's history.jsonl: events and their fields
    elastic_training.elasticjob     the ElasticJob's names and labels

The library (torch): resume from the newest verified checkpoint, atomic checksummed saves keeping the
previous one, a save on SIGTERM and every N seconds at a step all workers agree on, progress lines in
the run's history, a stop on a non-finite loss, the world size, rank and device.

    import elastic_training
    run = elastic_training.Run()              # rank, world size, device, process group, run directory
    state = run.resume()                      # the newest verified checkpoint, or None
    ...
    run.step_done(step, lambda: {...})        # checkpoints by time and on SIGTERM, at an agreed step
    run.finish(model.state_dict())            # model.pt; the run is done

docs/train-your-own.md shows a plain DDP loop with and without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Run", "NonFiniteLoss", "newest_checkpoint", "save_checkpoint"]


def __getattr__(name: str) -> Any:
    # The library needs torch; the contract modules must not (the Pulumi program imports them).
    if name in ("Run", "NonFiniteLoss"):
        from elastic_training import run

        return getattr(run, name)
    if name in ("newest_checkpoint", "save_checkpoint"):
        from elastic_training import checkpoints

        return getattr(checkpoints, name)
    raise AttributeError(f"module 'elastic_training' has no attribute {name!r}")
