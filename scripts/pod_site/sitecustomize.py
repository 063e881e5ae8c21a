"""Loaded by every Python process the pod runner starts (scripts/pod_runner.py puts this folder first on
the pod's PYTHONPATH): where the container would find its in-cluster credentials, this process finds
them under its pod's root.

The `kubernetes` client reads the ServiceAccount token and CA from fixed paths,
/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt} (kubernetes/config/incluster_config.py,
SERVICE_TOKEN_FILENAME and SERVICE_CERT_FILENAME, read when load_incluster_config() is called). A pod
process has no file system of its own, so the runner puts the pod's volumes under POD_RUNNER_ROOT, and
this hook prefixes those two paths with it once that module is imported. Nothing else is changed.
"""

import os
import sys

_ROOT = os.environ.get("POD_RUNNER_ROOT")
_MODULE = "kubernetes.config.incluster_config"

if _ROOT:
    import importlib.abc
    import importlib.util

    class _InClusterPaths(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != _MODULE:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                module.SERVICE_TOKEN_FILENAME = _ROOT + module.SERVICE_TOKEN_FILENAME
                module.SERVICE_CERT_FILENAME = _ROOT + module.SERVICE_CERT_FILENAME

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _InClusterPaths())
