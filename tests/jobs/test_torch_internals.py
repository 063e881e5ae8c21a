"""jobs.elastic.rendezvous uses torch's private rendezvous internals (upstream-facts-4 fact 4): this fails,
naming what is missing, on a torch that changed them, and when the module starts using one it does not
declare. torch stays pinned exactly (pyproject.toml) for the same reason."""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
import uuid

import torch
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _RendezvousState
from torchrun_harness import REPO_ROOT

from jobs.elastic import rendezvous

TORCH_PIN = "2.13.0"


def _self_attributes(cls_node: ast.ClassDef) -> set[str]:
    return {
        node.attr
        for node in ast.walk(cls_node)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr.startswith("_")
    }


def test_torch_is_pinned_exactly():
    """The jobs' extra and the image's requirements (which a test keeps in step) pin torch with `==`."""
    jobs = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["jobs"]
    assert f"torch=={TORCH_PIN}" in jobs, [d for d in jobs if d.startswith("torch")]
    image = (REPO_ROOT / "images" / "requirements.txt").read_text().split()
    assert f"torch=={TORCH_PIN}" in image, [d for d in image if d.startswith("torch")]
    assert torch.__version__.split("+")[0] == TORCH_PIN


def test_every_private_member_of_torch_the_handler_uses_is_declared():
    """The private names our handler reads on `self` that it does not define itself are torch's:
    each must be in rendezvous.TORCH_HANDLER_INTERNALS, which the next test checks against torch."""
    module = ast.parse(inspect.getsource(rendezvous))
    (handler,) = [
        node
        for node in module.body
        if isinstance(node, ast.ClassDef) and node.name == rendezvous.OutlastingRendezvousHandler.__name__
    ]
    ours = {node.name for node in handler.body if isinstance(node, ast.FunctionDef)}
    ours |= {
        target.id
        for node in handler.body
        if isinstance(node, ast.AnnAssign | ast.Assign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    used = _self_attributes(handler) - ours
    assert used <= set(rendezvous.TORCH_HANDLER_INTERNALS), \
        f"jobs/elastic/rendezvous.py uses torch's {sorted(used - set(rendezvous.TORCH_HANDLER_INTERNALS))} " \
        "without declaring them in TORCH_HANDLER_INTERNALS"  # fmt: skip
    fields = set(re.findall(r"state\.([a-z_]+)", inspect.getsource(rendezvous)))
    assert fields <= set(rendezvous.TORCH_STATE_FIELDS), \
        f"jobs/elastic/rendezvous.py uses _RendezvousState fields {sorted(fields - set(rendezvous.TORCH_STATE_FIELDS))} " \
        "without declaring them in TORCH_STATE_FIELDS"  # fmt: skip


def test_torch_has_every_internal_the_handler_uses(store_server):
    handler = rendezvous.create_handler(
        RendezvousParameters(rendezvous.BACKEND, store_server.endpoint, f"internals-{uuid.uuid4().hex[:8]}", 1, 1)
    )
    missing = [name for name in rendezvous.TORCH_HANDLER_INTERNALS if not hasattr(handler, name)]
    assert not missing, (
        f"torch {torch.__version__}'s DynamicRendezvousHandler has no {missing}: jobs/elastic/rendezvous.py uses them"
    )
    assert hasattr(handler._state_holder, "state"), (
        f"torch {torch.__version__}: the handler's _state_holder has no `state`"
    )
    fields = set(vars(_RendezvousState()))
    missing = sorted(set(rendezvous.TORCH_STATE_FIELDS) - fields)
    assert not missing, (
        f"torch {torch.__version__}'s _RendezvousState has no {missing}: jobs/elastic/rendezvous.py uses them"
    )
    # torch 2.13.0's fields: a new or removed one changes what a reseeded or renewed state carries.
    assert fields == {
        "round",
        "complete",
        "deadline",
        "closed",
        "participants",
        "wait_list",
        "redundancy_list",
        "last_heartbeats",
    }, f"torch {torch.__version__}'s _RendezvousState fields changed: {sorted(fields)}"
