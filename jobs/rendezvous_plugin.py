"""How torchrun finds our rendezvous backend: the `torchrun.handlers` entry point (pyproject.toml).

torch loads that entry point while `torch.distributed.elastic.rendezvous` itself is being imported
(rendezvous/__init__.py calls registry.py `_register_out_of_tree_handlers`), and jobs.rendezvous
imports that package: so this module imports nothing from torch, and `create` imports
jobs.rendezvous only when torchrun builds a handler. jobs.torchrun registers the same `create`
(the registry accepts one creator under a name, the same one twice).
"""

from __future__ import annotations

from typing import Any

BACKEND = "reconnecting-c10d"
DEFAULT_PORT = 29400  # torch's c10d backend's port (c10d_rendezvous_backend.py DEFAULT_PORT): the store's


def create(params: Any) -> Any:
    """The handler for `--rdzv_backend=reconnecting-c10d` (jobs.rendezvous.create_handler)."""
    from jobs.rendezvous import create_handler

    return create_handler(params)


def handler_creator():
    """The entry point: torch's registry calls it with no argument and registers what it returns."""
    return create
