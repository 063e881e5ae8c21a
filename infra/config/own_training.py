"""The keys that run a user's own training (issue 38): the training command, the image context, the
data-prep and test commands, and the gate. Their defaults are today's CIFAR-10 job: each key empty
means "the CIFAR-10 job's own", so a stack that sets none of them renders what it always did.

    trainingCommand  ["python", "-m", "mytrain", "--steps", "5"] or ["python", "train.py", ...]: what every
                     worker runs under torchrun (jobs.elastic.agent); "python" may be left out
    imageContext     a folder (relative to the project) with a Dockerfile, built and pushed by the stack
    dataPrepCommand  the data-prep Job's command (any executable of the image)
    testCommand      the test Job's command; then metrics.json's gateMetric must reach minGate
    gateMetric       the key of the run's metrics.json the gate reads (default accuracy)
    minGate          its least value; empty: minAccuracy's
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from infra.config.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("python", "python3")
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,62}")
TRAINING_EXAMPLE = '["python", "-m", "mytrain", "--steps", "5"] or ["python", "train.py"]'
COMMAND_EXAMPLE = '["python", "-m", "myprep", "--out", "/efs-shared/data"]'


def _string_list(raw: str | list, example: str) -> list[str]:
    # The raw config text (JSON); the declared default [] arrives as the list itself.
    try:
        value = raw if isinstance(raw, list) else json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"must be a JSON list of strings, e.g. {example}")
    return value


def parse_training_command(raw: str) -> list[str]:
    return _string_list(raw, TRAINING_EXAMPLE)


def parse_command(raw: str) -> list[str]:
    return _string_list(raw, COMMAND_EXAMPLE)


def parse_optional_decimal(raw: str) -> float | None:
    if raw.strip() == "":
        return None
    if not re.fullmatch(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)", raw.strip()):
        raise ValueError('must be a decimal number such as 0.7, or "" for minAccuracy\'s')
    return float(raw)


def _blank_item(command: list[str]) -> bool:
    return any(not item.strip() or "\n" in item for item in command)


def torchrun_target(command: list[str]) -> list[str] | None:
    """What torchrun runs in every worker for a trainingCommand: ["-m", NAME, args...] or
    [SCRIPT.py, args...] (a leading python dropped: torchrun starts the interpreter), or None
    when the command is neither."""
    rest = command[1:] if command and command[0] in PYTHONS else command
    if len(rest) >= 2 and rest[0] == "-m" and MODULE_NAME.fullmatch(rest[1]):
        return rest
    if rest and rest[0].endswith(".py") and not rest[0].startswith("-"):
        return rest
    return None


def training_command_rule(command: list[str]) -> str | None:
    if command == []:
        return None
    if _blank_item(command) or torchrun_target(command) is None:
        return (
            f"must be [] (the CIFAR-10 job) or what every worker runs under torchrun, as a JSON list: "
            f"{TRAINING_EXAMPLE}"
        )
    return None


def command_rule(command: list[str]) -> str | None:
    if command == [] or not _blank_item(command):
        return None
    return f"must be [] (the CIFAR-10 job's) or a command as a JSON list of non-empty strings, e.g. {COMMAND_EXAMPLE}"


def image_context_rule(folder: str) -> str | None:
    if folder == "":
        return None
    path = Path(folder)
    if path.is_absolute() or ".." in path.parts or "\n" in folder:
        return "must be empty (the project's image) or a folder inside the project, e.g. mytrain/image"
    if not (PROJECT_ROOT / path / "Dockerfile").is_file():
        return f"must be a folder with a Dockerfile: {PROJECT_ROOT / path / 'Dockerfile'} does not exist"
    return None


def gate_metric_rule(name: str) -> str | None:
    return None if METRIC_NAME.fullmatch(name) else "must be a key of the run's metrics.json, e.g. accuracy"


def min_gate_rule(value: float | None) -> str | None:
    return None if value is None or abs(value) < 1e12 else "must be a decimal number such as 0.7"


def check_own_training(v: dict[str, Any], project: str, eks: str) -> None:
    """Rules between these keys and the others."""
    if v["image_context"] and v["target"] != eks:
        raise ConfigError(
            f"{project}:imageContext",
            v["image_context"],
            "must be empty with target existing (there is no registry to push to): build the image "
            "yourself and set imageUri",
        )
    if v["image_context"] and v["image_uri"]:
        raise ConfigError(
            f"{project}:imageContext",
            v["image_context"],
            "must be empty when imageUri is set (one image: built from imageContext, or imageUri)",
        )
    if not v["test_command"] and v["min_gate"] is not None and not 0 <= v["min_gate"] <= 1:
        # The CIFAR-10 evaluation takes the gate as --min-accuracy, a fraction it checks only when the test Job
        # runs (jobs/results/evaluate.py), after the whole training.
        raise ConfigError(
            f"{project}:minGate",
            v["min_gate"],
            "must be between 0 and 1 with the CIFAR-10 test command (testCommand empty): it gates "
            "accuracy, a fraction (0.7 means 70 %)",
        )
    if not v["test_command"] and v["gate_metric"] != "accuracy":
        raise ConfigError(
            f"{project}:gateMetric",
            v["gate_metric"],
            "must be accuracy with the CIFAR-10 test command (testCommand empty): it is what that "
            "evaluation writes to metrics.json",
        )


def gate(settings) -> float:
    """The least gateMetric that passes: minGate, or minAccuracy when minGate is empty."""
    return settings.min_accuracy if settings.min_gate is None else settings.min_gate
