"""Bounds on torchrun's own options, checked by jobs.elastic.agent before it starts torchrun.

torchrun turns a bad value into an assertion deep inside its launcher (`--nnodes=0`,
`--nproc_per_node=-1`, `--max_restarts=-5`: 17 lines of traceback) or accepts it; the worker pod
should say in one line what is wrong and what is allowed, and exit 2 (bad input, permanent).

The parser mirrors the option names of torch 2.13.0's torch/distributed/run.py `get_args_parser`
(tests/jobs/test_agent_faults.py compares the two), so that the values found here are the ones
torchrun will use: options end where the training script begins, as in torchrun.
PET_* environment variables (torchrun's defaults for each option) are not checked.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence

MAX_NODES = 1024
MAX_PROCESSES_PER_NODE = 512
MAX_RESTARTS = 100
MAX_MONITOR_INTERVAL = 60.0
MAX_SHUTDOWN_TIMEOUT = 3600

_FLAGS = [("--standalone",), ("-m", "--module"), ("--no-python", "--no_python"), ("--run-path", "--run_path"),
          ("--virtual-local-rank", "--virtual_local_rank")]  # fmt: skip
_VALUED = [
    ("--nnodes",), ("--nproc-per-node", "--nproc_per_node"), ("--rdzv-backend", "--rdzv_backend"),
    ("--rdzv-endpoint", "--rdzv_endpoint"), ("--rdzv-id", "--rdzv_id"), ("--rdzv-conf", "--rdzv_conf"),
    ("--max-restarts", "--max_restarts"), ("--monitor-interval", "--monitor_interval"),
    ("--start-method", "--start_method"), ("--event-log-handler", "--event_log_handler"), ("--role",),
    ("--log-dir", "--log_dir"), ("-r", "--redirects"), ("-t", "--tee"),
    ("--local-ranks-filter", "--local_ranks_filter"), ("--duplicate-stdout-filters", "--duplicate_stdout_filters"),
    ("--duplicate-stderr-filters", "--duplicate_stderr_filters"), ("--node-rank", "--node_rank"),
    ("--master-addr", "--master_addr"), ("--master-port", "--master_port"), ("--local-addr", "--local_addr"),
    ("--logs-specs", "--logs_specs"), ("--numa-binding", "--numa_binding"),
    ("--signals-to-handle", "--signals_to_handle"), ("--shutdown-timeout", "--shutdown_timeout"),
]  # fmt: skip


class BadOption(ValueError):
    """One line: which option, what it got, what is allowed."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise BadOption(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="torchrun", add_help=False)
    for names in _FLAGS:
        parser.add_argument(*names, action="store_true")
    for names in _VALUED:
        parser.add_argument(*names)
    parser.add_argument("training_script", nargs="?")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def option_names() -> set[str]:
    return {name for names in (*_FLAGS, *_VALUED) for name in names}


def _whole(option: str, text: str, low: int, high: int) -> int:
    if not re.fullmatch(r"[+-]?\d+", text.strip()) or not low <= int(text) <= high:
        raise BadOption(f"{option}={text}: must be a whole number from {low} to {high}")
    return int(text)


def check(torchrun_args: Sequence[str]) -> None:
    """Raise BadOption for a value torchrun would reject with a traceback or should not accept."""
    if any(arg in ("-h", "--help") for arg in torchrun_args[: _script_start(torchrun_args)]):
        return  # torchrun prints its help
    args = _parser().parse_args(list(torchrun_args))
    if args.nnodes is not None:
        low, _, high = args.nnodes.partition(":")
        minimum = _whole("--nnodes", low, 1, MAX_NODES) if ":" in args.nnodes else None
        maximum = _whole("--nnodes", high if ":" in args.nnodes else low, 1, MAX_NODES)
        if minimum is not None and minimum > maximum:
            raise BadOption(f"--nnodes={args.nnodes}: MIN:MAX needs MIN <= MAX, both from 1 to {MAX_NODES}")
    if args.nproc_per_node is not None and args.nproc_per_node not in ("auto", "cpu", "gpu", "xpu"):
        try:
            _whole("--nproc_per_node", args.nproc_per_node, 1, MAX_PROCESSES_PER_NODE)
        except BadOption:
            raise BadOption(f"--nproc_per_node={args.nproc_per_node}: must be a whole number from 1 to "
                            f"{MAX_PROCESSES_PER_NODE}, or auto, cpu, gpu or xpu") from None  # fmt: skip
    if args.max_restarts is not None:
        _whole("--max_restarts", args.max_restarts, 0, MAX_RESTARTS)
    if args.node_rank is not None:
        _whole("--node_rank", args.node_rank, 0, MAX_NODES - 1)
    if args.master_port is not None:
        _whole("--master_port", args.master_port, 1, 65535)
    if args.shutdown_timeout is not None:
        _whole("--shutdown_timeout", args.shutdown_timeout, 0, MAX_SHUTDOWN_TIMEOUT)
    if args.monitor_interval is not None:
        try:
            interval = float(args.monitor_interval)
        except ValueError:
            interval = math.nan
        if not 0 < interval <= MAX_MONITOR_INTERVAL:
            raise BadOption(f"--monitor_interval={args.monitor_interval}: must be a number > 0 and <= "
                            f"{MAX_MONITOR_INTERVAL:g} (seconds)")  # fmt: skip
    if args.training_script is None:
        raise BadOption("no training script or module (e.g. -m jobs.training.train ...)")


def _script_start(args: Sequence[str]) -> int:
    """Index of the first argument that is not an option of torchrun's (or the value of one)."""
    valued = {name for names in _VALUED for name in names}
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):
            return index
        index += 2 if arg in valued else 1
    return index
