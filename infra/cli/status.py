"""`elastic-training status STACK`: where the stack's training run stands, from its ElasticJob's status
(what our controller writes: conditions, workers, the last failure, progress from the run's history).

It reads the cluster with a kubeconfig: target existing, the stack's own (kubeconfig, kubeContext);
target eks, the one `aws eks update-kubeconfig` writes (the stack output commands.kubeconfig prints
that command), or --kubeconfig/--context.

Exit status: 0 printed, 1 the cluster cannot be read or has no such run, 2 bad config or usage.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from infra.cli.args import OneLineParser, UsageError, add_config_overrides, add_stack_argument
from infra.components.kubernetes_reader import (
    ELASTICJOB_GROUP,
    ELASTICJOB_PLURAL,
    ELASTICJOB_VERSION,
    ApiError,
    KubernetesCluster,
    TransientApiError,
    _api_client,
)
from infra.config import EKS, ConfigError, load_settings
from infra.config.stack_file import StackConfigError, apply_overrides, read_stack_file, yaml_problem
from infra.specs.workloads import names

DEFAULT_KUBECONFIG = "~/.kube/config"


def default_kubeconfig() -> str:
    """Where kubectl looks: the first file of KUBECONFIG when it is set, else ~/.kube/config."""
    named = [part for part in os.environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    return named[0] if named else DEFAULT_KUBECONFIG


def kubeconfig_problem(kubeconfig: str, stack: str, target: str) -> str | None:
    """One line when the kubeconfig is missing or is not YAML (with its line), before the client reads it."""
    path = Path(kubeconfig).expanduser()
    if not path.is_file():
        create = (
            (
                f"the cluster of stack {stack} is not created yet, or its kubeconfig not written: "
                f"`elastic-training up {stack}` creates it, and the command its output commands.kubeconfig prints "
                "(aws eks update-kubeconfig ...) writes the kubeconfig"
            )
            if target == EKS
            else ("point the stack's kubeconfig key, or --kubeconfig, at your cluster's file")
        )
        return f"no kubeconfig {kubeconfig}: {create}"
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        return f"cannot read kubeconfig {kubeconfig}: {error.strerror or error}"
    except UnicodeDecodeError:
        return f"kubeconfig {kubeconfig} is not UTF-8 text"
    except yaml.YAMLError as error:
        return f"kubeconfig {kubeconfig} is not valid YAML: {yaml_problem(error)}"
    if not isinstance(document, dict) or "clusters" not in document:
        return f"{kubeconfig} is not a kubeconfig (a YAML mapping with clusters, contexts and users)"
    return None


STATES = ("Failed", "Succeeded", "Restarting", "Running", "Created")


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="elastic-training status", description=__doc__.split("\n\n")[0])
    add_stack_argument(parser)
    add_config_overrides(parser)
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help=f"kubeconfig file (default: the stack's on target existing, {DEFAULT_KUBECONFIG} on eks)",
    )
    parser.add_argument(
        "--context", default=None, help="kubeconfig context (default: the stack's, else the current one)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False,
        help="print the ElasticJob's status as JSON instead of lines (default: off, lines)",
    )
    return parser


def _true(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next(
        (c for c in status.get("conditions") or [] if c.get("type") == kind and c.get("status") == "True"), None
    )


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s"


def lines(elasticjob: dict[str, Any]) -> list[str]:
    """What `status` prints for an ElasticJob (an API dict)."""
    meta, status = elasticjob["metadata"], elasticjob.get("status") or {}
    state = next(((kind, c) for kind in STATES if (c := _true(status, kind))), ("Pending", None))
    kind, condition = state
    head = f"ElasticJob {meta['namespace']}/{meta['name']}: {kind}"
    if condition and condition.get("reason") and kind in ("Failed", "Restarting"):
        head += f" ({condition['reason']}: {condition.get('message', '')})"
    if status.get("startTime"):
        head += f", started {status['startTime']}"
    if status.get("completionTime"):
        head += f", finished {status['completionTime']}"
    out = [head]
    workers = (status.get("replicaStatuses") or {}).get("Worker")
    if workers:
        out.append(
            f"workers: {workers.get('active', 0)} active, {workers.get('succeeded', 0)} succeeded, "
            f"{workers.get('failed', 0)} failed"
        )
    progress = status.get("progress")
    if progress:
        # A run by epochs (the CIFAR-10 job), or by steps (a script on elastic_training: no epoch count).
        parts = (
            [f"epoch {progress.get('epoch')}/{progress.get('epochs')}"]
            if progress.get("epochs") is not None
            else [f"step {progress.get('step')}"]
            if progress.get("step") is not None
            else []
        )
        if progress.get("imagesIntoEpoch"):
            parts.append(f"{progress['imagesIntoEpoch']} images into the next")
        if progress.get("loss") is not None:
            parts.append(f"loss {progress['loss']:.4f}")
        if progress.get("accuracy") is not None:
            parts.append(f"train accuracy {100 * progress['accuracy']:.1f}%")
        if progress.get("imagesPerSecond") is not None:
            parts.append(f"{progress['imagesPerSecond']:.0f} images/s")
        if progress.get("secondsLeft") is not None and not progress.get("finished"):
            parts.append(f"about {_duration(progress['secondsLeft'])} left")
        if progress.get("goodput") is not None:
            parts.append(f"goodput {100 * progress['goodput']:.0f}%")
        out.append(
            "progress: "
            + ", ".join(parts)
            + (f" (history of {progress['updated']})" if progress.get("updated") else "")
        )
    last = status.get("lastFailure")
    if last:
        out.append(
            f"last failure: worker {last.get('pod')} (index {last.get('index')}) exited {last.get('exitCode')} "
            f"({last.get('reason')}): {last.get('action')}, at {last.get('time')}"
        )
    return out


def read_elasticjob(kubeconfig: str, context: str, namespace: str, name: str) -> dict[str, Any]:
    from kubernetes import client

    custom = client.CustomObjectsApi(_api_client(kubeconfig, context))
    return KubernetesCluster._call(
        custom.get_namespaced_custom_object, ELASTICJOB_GROUP, ELASTICJOB_VERSION, namespace, ELASTICJOB_PLURAL, name
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        settings = load_settings(apply_overrides(read_stack_file(args.stack), args.config), args.stack)
    except (UsageError, ConfigError, StackConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stack_kubeconfig = default_kubeconfig() if settings.target == EKS else settings.kubeconfig
    kubeconfig = args.kubeconfig or stack_kubeconfig
    problem = kubeconfig_problem(kubeconfig, args.stack, settings.target)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    context = args.context if args.context is not None else ("" if settings.target == EKS else settings.kube_context)
    name = names(settings.run_id).training
    try:
        elasticjob = read_elasticjob(kubeconfig, context, settings.namespace, name)
    except (ApiError, TransientApiError) as error:
        missing = isinstance(error, ApiError) and error.status == 404
        print(
            f"error: {'no run' if missing else 'cannot read'} ElasticJob {settings.namespace}/{name} of stack "
            f"{args.stack} ({error})" + ("; `elastic-training up` starts it" if missing else ""),
            file=sys.stderr,
        )
        return 1
    except Exception as error:  # noqa: BLE001 - a kubeconfig that does not load is one line too
        print(
            f"error: cannot use kubeconfig {kubeconfig} for stack {args.stack}: {error}".splitlines()[0],
            file=sys.stderr,
        )
        return 1
    print(json.dumps(elasticjob.get("status") or {}, sort_keys=True) if args.json else "\n".join(lines(elasticjob)))
    return 0
