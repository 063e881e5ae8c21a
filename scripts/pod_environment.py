"""What a pod's container sees, for the pod runner (scripts/pod_runner.py): its environment, and the
rewriting of its command, args and env values that stands in for a container's own file system and
network.

No container runtime runs here: a pod's process is a process of this machine, in this checkout's
`.venv`. So three things a container gives its process are given by rewriting the strings of its spec
(command, args and env values, after Kubernetes' own `$(VAR)` expansion):

- paths: each volumeMount's `mountPath` becomes `<pod root><mountPath>`, where the pod runner put the
  volume (scripts/pod_volumes.py); `/efs-shared/runs/x` -> `<root>/efs-shared/runs/x`;
- Service names: each Service of the pod's namespace, as `svc`, `svc.ns`, `svc.ns.svc` or
  `svc.ns.svc.cluster.local` followed by `:` `/` or the end, becomes the Service's loopback address
  (scripts/service_proxy.py), which forwards to its ready endpoints; `rendezvous-store:29400` ->
  `127.2.0.1:29400`. C++ code (torch's TCPStore) resolves names with the C library, which no Python
  hook reaches, hence the rewrite rather than a resolver;
- `0.0.0.0` (every address of the container's own network) becomes the pod's own loopback address.

Kubernetes' rules kept here: env entries in order, each may use `$(NAME)` of the entries before it and
the `$$` escape (Kubernetes API: Container.command/args/env "Variable references $(VAR_NAME) are
expanded using the container's environment"); the downward API's fieldRef paths.
"""

from __future__ import annotations

import base64
import re
from typing import Any, Callable

# Reads a ConfigMap's or a Secret's data: (kind, namespace, name) -> dict or None when it does not exist.
Reader = Callable[[str, str, str], "dict[str, str] | None"]
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
# Where a host name starts: the string's start, or after a flag's `=`, a list's `,`, a space, a URL's `//`
# or `user@`.
_BEFORE = r"(?:(?<=^)|(?<=[\s=,@])|(?<=//))"


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: a defined name is replaced, an undefined one is left as written,
    `$$` is a literal `$`."""

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(one, text)


def field_value(pod: dict[str, Any], path: str) -> str:
    """A downward-API fieldRef (Kubernetes docs, "Information available via fieldRef")."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIPs": ",".join(ip["ip"] for ip in status.get("podIPs") or []),
        "status.hostIPs": ",".join(ip["ip"] for ip in status.get("hostIPs") or []),
    }
    if path in simple:
        return simple[path]
    keyed = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if keyed:
        return (meta.get(keyed.group(1)) or {}).get(keyed.group(2), "")
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{key}="{value}"' for key, value in sorted(values.items()))
    raise ValueError(f"fieldRef {path!r} is not one the downward API offers")


def _data(reader: Reader, kind: str, namespace: str, name: str) -> dict[str, str] | None:
    found = reader(kind, namespace, name)
    if found is None or kind == "ConfigMap":
        return found
    return {key: base64.b64decode(value).decode() for key, value in found.items()}


# What the runtime sets that names this machine's paths, not the container's: never rewritten.
HOST_PATH_VARIABLES = ("PATH", "PYTHONPATH")


def rewritten_env(env: dict[str, str], base: dict[str, str], rewrite: Callable[[str], str]) -> dict[str, str]:
    """`env` with its values rewritten (Rewriter), but for the runtime's own host paths left as `base` set them:
    a checkout under /tmp must not become `<pod root>/tmp/...` in PATH because the pod mounts /tmp."""
    return {
        key: value if key in HOST_PATH_VARIABLES and base.get(key) == value else rewrite(value)
        for key, value in env.items()
    }


def container_env(
    pod: dict[str, Any], container: dict[str, Any], reader: Reader, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The container's environment: `base` (what the runtime sets), then envFrom, then env in order."""
    namespace = pod["metadata"]["namespace"]
    env = dict(base or {})
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source:
                data = _data(reader, kind, namespace, source[key]["name"])
                if data is None and not source[key].get("optional"):
                    raise LookupError(f"{kind} {namespace}/{source[key]['name']} not found")
                env.update({prefix + k: v for k, v in (data or {}).items()})
    for entry in container.get("env") or []:
        name = entry["name"]
        if "value" in entry:
            env[name] = expand(entry["value"], env)
            continue
        source = entry.get("valueFrom") or {}
        if "fieldRef" in source:
            env[name] = field_value(pod, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            resource = source["resourceFieldRef"]["resource"]
            bound, _, what = resource.partition(".")
            env[name] = str(((container.get("resources") or {}).get(bound) or {}).get(what, "0"))
        else:
            for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                if key in source:
                    ref = source[key]
                    data = _data(reader, kind, namespace, ref["name"]) or {}
                    if ref["key"] in data:
                        env[name] = data[ref["key"]]
                    elif not ref.get("optional"):
                        raise LookupError(f"{kind} {namespace}/{ref['name']} has no key {ref['key']!r}")
    return env


class Rewriter:
    """A pod's paths, Service names and wildcard address, rewritten as the module's docstring says."""

    def __init__(self, root: str, mount_paths: list[str], namespace: str, services: dict[str, str], pod_ip: str):
        # One pattern, one pass: what a rule puts in (the pod's root, an address) is never matched again.
        self.hosts = {"0.0.0.0": pod_ip}
        for name, address in services.items():
            for alias in (
                f"{name}.{namespace}.svc.cluster.local",
                f"{name}.{namespace}.svc",
                f"{name}.{namespace}",
                name,
            ):
                self.hosts[alias] = address
        self.root = root
        mounts = sorted({m.rstrip("/") for m in mount_paths if m.rstrip("/")}, key=len, reverse=True)
        hosts = "|".join(re.escape(h) for h in sorted(self.hosts, key=len, reverse=True))
        # A path: neither after nor before a path name's character (so /tmp matches in neither /a/tmp nor /tmpfile).
        paths = "|".join(re.escape(m) for m in mounts) or "(?!)"
        self.pattern = re.compile(rf"{_BEFORE}(?P<host>{hosts})(?=[:/]|$)|(?<![\w./-])(?P<path>{paths})(?![\w.-])")

    def __call__(self, text: str) -> str:
        def one(match: re.Match) -> str:
            if match.group("host") is not None:
                return self.hosts[match.group("host")]
            return self.root + match.group("path")

        return self.pattern.sub(one, text)
