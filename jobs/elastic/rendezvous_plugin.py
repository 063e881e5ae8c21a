"""How torchrun finds our rendezvous backend: the `torchrun.handlers` entry point (pyproject.toml).

torch loads that entry point while `torch.distributed.elastic.rendezvous` itself is being imported
(rendezvous/__init__.py calls registry.py `_register_out_of_tree_handlers`), and jobs.elastic.rendezvous
imports that package: so this module imports nothing at its top, and `create` imports
jobs.elastic.rendezvous only when torchrun builds a handler. `register` puts the same `create` in
the registry of a process in which the entry point is not installed (the registry accepts one
creator under a name, the same one twice).
"""

from __future__ import annotations

from typing import Any


def create(params: Any) -> Any:
    """The handler for `--rdzv_backend=reconnecting-c10d` (jobs.elastic.rendezvous.create_handler)."""
    from jobs.elastic.rendezvous import create_handler

    return create_handler(params)


def handler_creator():
    """The entry point: torch's registry calls it with no argument and registers what it returns."""
    return create


def register() -> None:
    """Make the backend known to torchrun in this process, installed or not (idempotent)."""
    from torch.distributed.elastic.rendezvous.api import rendezvous_handler_registry

    from jobs.elastic.rendezvous import BACKEND

    rendezvous_handler_registry.register(BACKEND, create)
