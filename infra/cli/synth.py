"""Offline render of a stack, like `cdk synth` or `helm template`.

    elastic-training synth STACK --out DIR [-c KEY=VALUE ...]

Runs the real program for stacks/Pulumi.<STACK>.yaml under Pulumi's mocks (no credentials, no
network, no Pulumi CLI) and writes:
  DIR/manifests/*.yaml   every Kubernetes object the stack applies, in wire form, one per file
  DIR/resources.json     every resource: type, name, parent, provider, dependsOn, retainOnDelete,
                         protect, replaceOnChanges, deleteBeforeReplace, inputs
  DIR/graph.mmd          the component/resource graph as a Mermaid flowchart
  DIR/outputs.json       the stack outputs (secrets masked)
  DIR/cost.json          what the stack costs per hour while it exists, item by item (infra/cli/cost.py)
  DIR/.synth             a marker: DIR was written by synth, and the next synth may replace it
Invalid config, or a DIR that synth did not write (a file, or a directory with other things in
it): one line on stderr, exit status 2, nothing written and nothing deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import yaml

from elastic_training import exit_codes
from infra.cli import cost
from infra.cli.args import OneLineParser, UsageError
from infra.config import PROJECT, ConfigError, Settings, load_settings
from infra.cli.mocks import RecordingMocks, Registration
from infra.config.stack_file import STACKS_DIR, StackConfigError, apply_overrides, read_stack_file, stack_name

SECRET_INPUTS = {"kubeconfig", "password"}
# Written into every output directory: only a directory holding it is ever replaced.
MARKER = ".synth"
MARKER_TEXT = "Written by `elastic-training synth`; the next synth into this directory replaces all of it.\n"
# A Helm release is not an object of the cluster: its chart, version and values are in resources.json.
NOT_MANIFESTS = ("pulumi:providers:kubernetes", "kubernetes:helm.sh/v3:Release")
MANIFEST_KEY_ORDER = ("apiVersion", "kind", "metadata")


class SynthError(Exception):
    """A problem the user can fix; its text is the one line shown."""


def integral_floats_to_ints(value: Any) -> Any:
    """Numbers cross the mock boundary as floats (replicas: 2.0); Kubernetes wants integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral_floats_to_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_floats_to_ints(v) for v in value]
    return value


def _mask(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: ("[secret]" if k in SECRET_INPUTS else v) for k, v in inputs.items() if not k.startswith("__")}


def is_manifest(registration: Registration) -> bool:
    return (
        registration.custom and registration.type.startswith("kubernetes:") and registration.type not in NOT_MANIFESTS
    )


def sorted_keys(value: Any) -> Any:
    """Map order across the mock boundary is random; sorted keys keep rendered files stable."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def manifest(registration: Registration) -> dict[str, Any]:
    """The object in wire form: apiVersion, kind, metadata first (as people write them), then the rest."""
    inputs = sorted_keys(integral_floats_to_ints(registration.inputs))
    ordered = {key: inputs[key] for key in MANIFEST_KEY_ORDER if key in inputs}
    ordered.update({key: inputs[key] for key in inputs if key not in MANIFEST_KEY_ORDER})
    return ordered


def manifest_filename(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    parts = [obj["kind"].lower(), meta.get("namespace", ""), meta["name"]]
    return "_".join(p for p in parts if p) + ".yaml"


def resource_inventory(registrations: list[Registration]) -> list[dict[str, Any]]:
    return [
        {
            "type": r.type,
            "name": r.name,
            "urn": r.urn,
            "parent": r.parent,
            "provider": r.provider.split("::")[-2] if r.provider else "",
            "providerUrn": r.provider.rsplit("::", 1)[0] if r.provider else "",
            "dependsOn": r.depends_on,
            "retainOnDelete": r.retain_on_delete,
            "protect": r.protect,
            "replaceOnChanges": r.replace_on_changes,
            "deleteBeforeReplace": r.delete_before_replace,
            "inputs": integral_floats_to_ints(_mask(r.inputs)),
        }
        for r in registrations
    ]


def mermaid_graph(registrations: list[Registration]) -> str:
    """Components as subgraphs holding their children; an arrow from each dependency to its dependent."""
    ids = {r.urn: f"r{index}" for index, r in enumerate(registrations)}
    children: dict[str, list[Registration]] = {}
    for r in registrations:
        children.setdefault(r.parent, []).append(r)

    def label(r: Registration) -> str:
        return re.sub(r'["<>]', "", f"{r.name} · {r.type}")

    lines = ["flowchart LR"]

    def emit(r: Registration, indent: str) -> None:
        if not r.custom and children.get(r.urn):
            lines.append(f'{indent}subgraph {ids[r.urn]}["{label(r)}"]')
            for child in children[r.urn]:
                emit(child, indent + "  ")
            lines.append(f"{indent}end")
        else:
            lines.append(f'{indent}{ids[r.urn]}["{label(r)}"]')

    roots = [r for r in registrations if r.parent not in ids]
    for r in roots:
        emit(r, "  ")
    for r in registrations:
        for dependency in r.depends_on:
            if dependency in ids:
                lines.append(f"  {ids[dependency]} --> {ids[r.urn]}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _event_loops() -> Iterator[None]:
    """Event loops for one run of the program under mocks, all closed after it.

    Pulumi's mocks run the program on the main thread's event loop, which `asyncio.Future()` makes
    implicitly (pulumi/runtime/resource.py `resource_output`), and each call to the mock monitor in a
    thread of that loop's default executor makes that thread one (pulumi/runtime/sync_await.py
    `_ensure_event_loop`, called by pulumi/runtime/mocks.py MockMonitor.Invoke, RegisterResource and
    ReadResource; pulumi 3.272.0). Pulumi closes none of them, so each was "unclosed event loop" (and
    its two sockets) at exit, a ResourceWarning (an error under PYTHONWARNINGS=error::ResourceWarning).
    Here the program gets a loop of ours and an executor whose threads start with a loop of ours, which
    `_ensure_event_loop` then finds; after the run the tasks left are cancelled and every loop is closed,
    as asyncio.run does. The caller's event loop policy, and so its loop, is put back as it was."""
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    thread_loops: list[asyncio.AbstractEventLoop] = []

    def thread_loop() -> None:
        made = asyncio.new_event_loop()
        thread_loops.append(made)
        asyncio.set_event_loop(made)

    executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="pulumi-mocks", initializer=thread_loop)
    loop = asyncio.new_event_loop()
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            for made in thread_loops:
                made.close()
            loop.close()
            asyncio.set_event_loop_policy(previous)


def run_program(settings: Settings) -> tuple[list[Registration], dict[str, Any]]:
    """Register the whole stack under mocks; return the registrations and resolved outputs."""
    import pulumi

    mocks = RecordingMocks(PROJECT, settings.stack, settings.region)
    outputs: dict[str, Any] = {}
    with _event_loops():
        mocks.install()
        from infra.program import build  # after the mocks are installed, as Pulumi requires

        @pulumi.runtime.test
        def register():
            exported = build(settings)
            secret_keys = {"kubeconfig"}

            def keep(values: dict[str, Any]) -> None:
                outputs.update({k: ("[secret]" if k in secret_keys else v) for k, v in values.items()})

            return pulumi.Output.all(**exported).apply(keep)

        register()
    registrations = sorted(mocks.registrations, key=lambda r: r.urn)
    return registrations, outputs


def check_out_dir(out: Path) -> None:
    """Refuse an --out that synth may not replace: it deletes only what it wrote before."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SynthError(f"--out {out} is not a directory; name a new directory or a previous synth output")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise SynthError(
            f"--out {out} is not empty and was not written by synth (no {MARKER} marker); name a new or empty directory"
        )
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise SynthError(f"--out {out}: {parent} is not a directory")
            break


# The staging directory being written, for the Ctrl-C handler to remove.
_STAGING: list[Path] = []
INTERRUPTED = exit_codes.INTERRUPTED  # 130 = 128 + SIGINT, as a shell reports it


@contextlib.contextmanager
def ctrl_c_ends_at_once():
    """Ctrl-C while the program runs under the mocks: one line, nothing written, exit 130. Pulumi's
    runtime runs the program on an event loop and gRPC threads, where a KeyboardInterrupt is swallowed
    or leaves the process waiting for ever (seen here: synth went on, or hung), so the handler does not
    raise: it removes what synth was writing and ends the process."""

    def interrupted(signum, frame):
        for staging in _STAGING:
            shutil.rmtree(staging, ignore_errors=True)
        print("elastic-training synth: interrupted (Ctrl-C); nothing written", file=sys.stderr, flush=True)
        os._exit(INTERRUPTED)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def write_synth(
    out: Path, registrations: list[Registration], outputs: dict[str, Any], cost_estimate: dict[str, Any] | None = None
) -> None:
    """Write everything into a fresh temporary directory first, then move it into place."""
    check_out_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    _STAGING.append(staging)
    try:
        (staging / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
        manifests_dir = staging / "manifests"
        manifests_dir.mkdir()
        for registration in registrations:
            if is_manifest(registration):
                obj = manifest(registration)
                (manifests_dir / manifest_filename(obj)).write_text(
                    yaml.safe_dump(obj, sort_keys=False), encoding="utf-8"
                )
        (staging / "resources.json").write_text(
            json.dumps(resource_inventory(registrations), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        (staging / "graph.mmd").write_text(mermaid_graph(registrations), encoding="utf-8")
        (staging / "outputs.json").write_text(
            json.dumps(integral_floats_to_ints(outputs), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        if cost_estimate is not None:
            (staging / "cost.json").write_text(
                json.dumps(cost_estimate, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        _STAGING.remove(staging)


def synth(stack: str, out: Path, overrides: list[str], stacks_dir: Path = STACKS_DIR) -> Settings:
    try:
        stack = stack_name(stack, stacks_dir)  # a name, or a path to its stack file
        raw = apply_overrides(read_stack_file(stack, stacks_dir), overrides)
        settings = load_settings(raw, stack)
        cost_estimate = cost.estimate(settings, datetime.now(timezone.utc).date())
    except (ConfigError, StackConfigError) as error:
        raise SynthError(str(error)) from None
    check_out_dir(out)  # before the program runs: a refused --out costs no time
    with ctrl_c_ends_at_once():
        registrations, outputs = run_program(settings)
        try:
            write_synth(out, registrations, outputs, cost_estimate)
        except OSError as error:
            raise SynthError(f"--out {out}: cannot write: {error.strerror or error}") from None
    return settings


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="elastic-training synth", description=__doc__.split("\n\n")[0])
    parser.add_argument("stack", help="stack name (dev), or its file stacks/Pulumi.<stack>.yaml (required)")
    # expanduser: a quoted '~/out' (a Makefile, a CI step) would otherwise make a folder named "~" here.
    parser.add_argument(
        "--out",
        required=True,
        type=lambda text: Path(text).expanduser(),
        help="directory to write: new, empty, or a previous synth output, which is replaced (required, no default)",
    )
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, as `pulumi config set KEY VALUE` would (repeatable; default: none, "
        "the stack file's values)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        settings = synth(args.stack, args.out, args.config)
    except SynthError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for warning in settings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"synth: stack {settings.stack} written to {args.out}")
    # The figures cost.json holds, so what is printed and what is written never differ.
    print(
        "\n".join(
            cost.lines(
                json.loads((args.out / "cost.json").read_text(encoding="utf-8")), sources=False, stack=settings.stack
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
