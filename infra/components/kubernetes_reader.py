"""The training wait's view of the cluster: the ElasticJob, its worker pods, their events, the rendezvous store's
state and the nodes, read through the official Kubernetes client with the stack's kubeconfig
(infra/components/completion.py decides what they mean).

Errors are sorted the way the wait needs them: TransientApiError (5xx, 429, a reset: asking again
may help) and ApiError (the server answered and will answer the same).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from infra.components import rendezvous_health
from infra.specs.workloads import WORKER_CONTAINER  # the controller reads exit codes from it only
from elastic_training.elasticjob import GROUP as ELASTICJOB_GROUP
from elastic_training.elasticjob import PLURAL as ELASTICJOB_PLURAL
from elastic_training.elasticjob import VERSION as ELASTICJOB_VERSION


@dataclass(frozen=True)
class Snapshot:
    """The ElasticJob, its worker pods and its events, as API dicts (camelCase)."""

    elasticjob: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    store: rendezvous_health.StoreState | None = None  # the rendezvous store's; None: not known


class TransientApiError(Exception):
    """The API server may answer next time: 5xx, 429, a connection reset or timeout."""


class ApiError(Exception):
    """The API server answered, and asking again will not change its answer."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _api_client(kubeconfig: str, context: str) -> Any:
    """A client for the same cluster the stack's Kubernetes provider talks to. `kubeconfig` is what
    the provider's `kubeconfig` argument takes (pulumi-kubernetes ProviderArgs: "the contents of a
    kubeconfig file or the path to a kubeconfig file"): pulumi-eks's document (JSON) on eks, a file
    path on target existing; `context` picks one of its contexts ("" is its current-context)."""
    import yaml
    from kubernetes import config  # imported here: only `pulumi up` needs it

    document = yaml.safe_load(kubeconfig)  # JSON is YAML; a path is a plain YAML string
    if isinstance(document, dict):
        return config.new_client_from_config_dict(document, context=context or None)
    # From the file itself, so relative certificate paths resolve against its folder as kubectl's do.
    return config.new_client_from_config(config_file=os.path.expanduser(kubeconfig), context=context or None)


def pod_scheduling_state(
    call: Callable[..., Any], core: Any, api_client: Any, namespace: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The namespace's pod events (FailedScheduling, TriggeredScaleUp, ...) and the nodes, or None
    for the nodes when the kubeconfig's user may not list them (an existing cluster's)."""
    serialize = api_client.sanitize_for_serialization
    events = call(core.list_namespaced_event, namespace, field_selector="involvedObject.kind=Pod")
    try:
        nodes: list[dict[str, Any]] | None = [serialize(node) for node in call(core.list_node).items]
    except ApiError as error:
        if error.status != 403:
            raise
        nodes = None
    return [serialize(event) for event in events.items], nodes


class KubernetesCluster:
    """The ElasticJob, its pods and events, through the official client and the stack's kubeconfig
    (pulumi-eks's: an exec plugin running `aws eks get-token`; on target existing, the kubeconfig
    file and context the provider uses)."""

    def __init__(self, kubeconfig: str, namespace: str, name: str, job_label: str, context: str = ""):
        from kubernetes import client  # imported here: only `pulumi up` needs it

        self.namespace, self.name, self._job_label = namespace, name, job_label
        self._api_client = _api_client(kubeconfig, context)
        self._custom = client.CustomObjectsApi(self._api_client)
        self._core = client.CoreV1Api(self._api_client)

    def read(self) -> Snapshot:
        elasticjob = self._call(
            self._custom.get_namespaced_custom_object,
            ELASTICJOB_GROUP,
            ELASTICJOB_VERSION,
            self.namespace,
            ELASTICJOB_PLURAL,
            self.name,
        )
        # Template labels are copied onto the pods the ElasticJob's Job creates.
        pods = self._call(
            self._core.list_namespaced_pod, self.namespace, label_selector=f"{self._job_label}={self.name}"
        )
        # The Job of the ElasticJob has its name (controller/render.py); its controller records FailedCreate there.
        events = self._call(
            self._core.list_namespaced_event,
            self.namespace,
            field_selector=f"involvedObject.kind=Job,involvedObject.name={self.name}",
        )
        serialize = self._api_client.sanitize_for_serialization
        store = rendezvous_health.read_store(
            self._call, self._api_client, self.namespace, (TransientApiError, ApiError)
        )
        return Snapshot(
            elasticjob, [serialize(pod) for pod in pods.items], [serialize(event) for event in events.items], store
        )

    def scheduling_state(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        return pod_scheduling_state(self._call, self._core, self._api_client, self.namespace)

    def read_nodes(self, names: set[str]) -> dict[str, dict[str, Any]]:
        """The named nodes as API dicts (their labels say instance type, zone and capacity type)."""
        nodes = self._call(self._core.list_node)
        serialize = self._api_client.sanitize_for_serialization
        return {node.metadata.name: serialize(node) for node in nodes.items if node.metadata.name in names}

    def worker_log_tail(self, pod: str, lines: int) -> str:
        # Raw body: the client's deserializer turns a body that is not JSON into the repr of its
        # bytes ("b'...'"; kubernetes/client/api_client.py deserialize, 36.0.3).
        response = self._call(
            self._core.read_namespaced_pod_log,
            pod,
            self.namespace,
            container=WORKER_CONTAINER,
            tail_lines=lines,
            _preload_content=False,
        )
        return response.data.decode("utf-8", errors="replace")

    def delete_elasticjob(self) -> None:
        # The Job carries an owner reference to the ElasticJob and the pods one to the Job (both with
        # blockOwnerDeletion), so the garbage collector deletes them with it. Foreground: the
        # ElasticJob stays until its Job and pods are gone, so an ElasticJob of the same name created
        # next never meets them (its Job would be refused as already existing).
        try:
            self._call(
                self._custom.delete_namespaced_custom_object,
                ELASTICJOB_GROUP,
                ELASTICJOB_VERSION,
                self.namespace,
                ELASTICJOB_PLURAL,
                self.name,
                propagation_policy="Foreground",
            )
        except ApiError as error:
            if error.status != 404:  # already gone is what we want
                raise

    @staticmethod
    def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            return method(*args, **kwargs)
        except ApiException as error:
            message = f"HTTP {error.status} {error.reason}"
            try:
                message += f": {json.loads(error.body)['message']}"
            except (TypeError, ValueError, KeyError):
                pass
            if error.status == 429 or (error.status or 0) >= 500:
                raise TransientApiError(message) from error
            raise ApiError(message, error.status) from error
        except (urllib3.exceptions.HTTPError, ConnectionError) as error:
            raise TransientApiError(f"{type(error).__name__}: {error}") from error
