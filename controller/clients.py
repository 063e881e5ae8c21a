"""How the controller reaches the API server: a kubeconfig (--kubeconfig or $KUBECONFIG) outside a pod, the pod's
service account inside one; clients that never retry a call inside urllib3 (the work queue's backoff is the retry)."""

from __future__ import annotations

import os
from typing import Any

from controller.reconcile import Api


class NoClusterAccess(Exception):
    """Neither a kubeconfig nor a pod's service account to reach the API server with: the user's setup."""


def connect(kubeconfig: str | None) -> tuple[Api, Any]:
    import yaml
    from kubernetes import client, config

    try:
        if kubeconfig or os.environ.get("KUBECONFIG"):
            # config_file None: the client reads $KUBECONFIG itself, a list of files included
            api_client = config.new_client_from_config(config_file=kubeconfig)
        else:
            config.load_incluster_config()
            api_client = client.ApiClient()
    except config.ConfigException as error:
        if not (kubeconfig or os.environ.get("KUBECONFIG")):
            raise NoClusterAccess(
                "not running in a pod (no service account to use): outside a pod pass "
                "--kubeconfig FILE or set KUBECONFIG"
            ) from None
        source = f"--kubeconfig {kubeconfig}" if kubeconfig else f"KUBECONFIG={os.environ['KUBECONFIG']}"
        raise NoClusterAccess(f"{source}: {error}") from None
    except (OSError, yaml.YAMLError) as error:  # a file the client could not read, or not YAML
        detail = error.strerror if isinstance(error, OSError) else " ".join(str(error).split())
        raise NoClusterAccess(f"kubeconfig {kubeconfig or os.environ.get('KUBECONFIG')}: {detail}") from None
    return api_of(api_client), client.CoordinationV1Api(api_client)


def api_of(api_client: Any) -> Api:
    """The worker's and watches' clients, on a transport that never retries: urllib3 retries a
    timed-out read three times by default, so a call bounded by REQUEST_SECONDS would take up to four
    times that (lease.without_retries says the same); the work queue's backoff is the retry."""
    import copy

    from kubernetes import client

    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    return Api(client.CustomObjectsApi(api_client), client.BatchV1Api(api_client), client.CoreV1Api(api_client))
