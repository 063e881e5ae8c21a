"""The worker pods of a rendered ElasticJob, as our controller's Job makes them: the Job's pod
template (controller/render.py, the real code the controller runs) under an index's name and
completion-index label. The Job controller copies the template whole (Kubernetes pkg/controller/job;
what it adds besides, such as the JOB_COMPLETION_INDEX variable, changes no test here); the real
control plane checks the pods themselves (tests/cluster/test_controller_*.py)."""

from __future__ import annotations

import copy
from typing import Any

from controller import job_indexes, render


def worker_pod(elasticjob: dict[str, Any], index: int = 0) -> dict[str, Any]:
    elasticjob = copy.deepcopy(elasticjob)
    elasticjob["metadata"].setdefault("uid", "00000000-0000-4000-8000-000000000000")
    template = render.job(elasticjob)["spec"]["template"]
    name = elasticjob["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{index}",
            "namespace": elasticjob["metadata"]["namespace"],
            "labels": {**template["metadata"]["labels"], job_indexes.INDEX_LABEL: str(index)},
            "annotations": dict(template["metadata"].get("annotations") or {}),
        },
        "spec": template["spec"],
    }


def command_line(pod: dict[str, Any], container_name: str) -> list[str]:
    """What the container runs: its command, then its args (the kubelet expands $(VAR) later)."""
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == container_name]
    return [*container.get("command", []), *container.get("args", [])]
