"""A pod's volumes as folders and files of this machine, for the pod runner (scripts/pod_runner.py).

- persistentVolumeClaim: `<shared volumes>/<namespace>/<claim>`, the same folder for every pod that mounts
  the claim (whatever node it runs on: like EFS, the volume of the stacks that have one); the runner binds
  each claim to a PersistentVolume of that folder (`bind_claims`), so the scheduler places its pods;
- emptyDir: `<pod dir>/volumes/<name>`, kept across container restarts, removed with the pod;
- configMap, secret, downwardAPI and projected (the ServiceAccount token the ServiceAccount admission
  plugin adds, `kube-api-access-*`): files written once, when the pod starts; the token is a real one,
  from the TokenRequest API, bound to the pod;
- hostPath: the host's path itself.

Each volumeMount is a link at `<pod root><mountPath>` to its volume (subPath: to that part of it); the
container's strings name those paths (pod_environment.Rewriter). readOnly is not enforced.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any, Callable

from pod_environment import Reader, field_value

# (namespace, service account, pod, expirationSeconds, audience or None) -> a token.
TokenMaker = Callable[[str, str, dict[str, Any], int, "str | None"], str]


def _write(folder: Path, files: dict[str, str | bytes], mode: int | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            path.chmod(mode & 0o777)


def _keyed(data: dict[str, str | bytes], items: list[dict[str, Any]] | None) -> dict[str, str | bytes]:
    if not items:
        return dict(data)
    return {item["path"]: data[item["key"]] for item in items if item["key"] in data}


def _source_files(
    pod: dict[str, Any], source: dict[str, Any], reader: Reader, token: TokenMaker
) -> dict[str, str | bytes]:
    """The files of one volume source (also one source of a projected volume)."""
    namespace = pod["metadata"]["namespace"]
    if "configMap" in source:
        ref = source["configMap"]
        data = reader("ConfigMap", namespace, ref["name"])
        if data is None:
            if ref.get("optional"):
                return {}
            raise LookupError(f"ConfigMap {namespace}/{ref['name']} not found")
        return _keyed(data, ref.get("items"))
    if "secret" in source:
        ref = source["secret"]
        name = ref.get("secretName") or ref.get("name")
        data = reader("Secret", namespace, name)
        if data is None:
            if ref.get("optional"):
                return {}
            raise LookupError(f"Secret {namespace}/{name} not found")
        return _keyed({k: base64.b64decode(v) for k, v in data.items()}, ref.get("items"))
    if "downwardAPI" in source:
        return {
            item["path"]: field_value(pod, item["fieldRef"]["fieldPath"])
            for item in source["downwardAPI"].get("items") or []
            if "fieldRef" in item
        }
    if "serviceAccountToken" in source:
        ref = source["serviceAccountToken"]
        account = pod["spec"].get("serviceAccountName") or "default"
        return {
            ref["path"]: token(namespace, account, pod, int(ref.get("expirationSeconds", 3600)), ref.get("audience"))
        }
    if "projected" in source:
        files: dict[str, str | bytes] = {}
        for part in source["projected"].get("sources") or []:
            files.update(_source_files(pod, part, reader, token))
        return files
    raise ValueError(f"volume source {sorted(source)} is not one the pod runner makes")


def materialize(
    pod: dict[str, Any], pod_dir: Path, shared_root: Path, reader: Reader, token: TokenMaker
) -> dict[str, Path]:
    """Every volume of `pod` made on this machine: its name -> its folder."""
    namespace = pod["metadata"]["namespace"]
    folders: dict[str, Path] = {}
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        if "persistentVolumeClaim" in volume:
            folder = shared_root / namespace / volume["persistentVolumeClaim"]["claimName"]
            folder.mkdir(parents=True, exist_ok=True)
        elif "emptyDir" in volume:
            folder = pod_dir / "volumes" / name
            folder.mkdir(parents=True, exist_ok=True)
        elif "hostPath" in volume:
            folder = Path(volume["hostPath"]["path"])
        else:
            folder = pod_dir / "volumes" / name
            source = {k: v for k, v in volume.items() if k != "name"}
            mode = next(iter(source.values())).get("defaultMode") if source else None
            _write(folder, _source_files(pod, source, reader, token), mode)
        folders[name] = folder
    return folders


def link_mounts(root: Path, container: dict[str, Any], folders: dict[str, Path]) -> list[str]:
    """The container's volumeMounts as links under `root`; returns their mount paths."""
    paths = []
    for mount in container.get("volumeMounts") or []:
        target = folders[mount["name"]]
        if mount.get("subPath"):
            target = target / mount["subPath"]
            target.mkdir(parents=True, exist_ok=True)
        link = root / mount["mountPath"].lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink() if link.is_symlink() or link.is_file() else shutil.rmtree(link)
        link.symlink_to(target, target_is_directory=target.is_dir())
        paths.append(mount["mountPath"])
    return paths


def termination_log(root: Path, container: dict[str, Any]) -> Path:
    """The file the container's terminationMessagePath names, under the pod's root, created empty (as the
    kubelet does before the container starts)."""
    path = root / container.get("terminationMessagePath", "/dev/termination-log").lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text("")
    return path


def bind_claims(api, shared_root: Path) -> None:
    """Every claim not yet bound gets a PersistentVolume of its folder, bound to it (claimRef), as a
    provisioner would; no node affinity: every node reaches the folder (module docstring)."""
    for claim in api.items("/api/v1/persistentvolumeclaims"):
        meta, spec = claim["metadata"], claim["spec"]
        if spec.get("volumeName") or meta.get("deletionTimestamp"):
            continue
        folder = shared_root / meta["namespace"] / meta["name"]
        folder.mkdir(parents=True, exist_ok=True)
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['uid']}",
                "annotations": {"pv.kubernetes.io/provisioned-by": "elastic-training.test/pod-runner"},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "storageClassName": spec.get("storageClassName") or "",
                "persistentVolumeReclaimPolicy": "Retain",
                "claimRef": {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]},
                "hostPath": {"path": str(folder), "type": "Directory"},
            },
        }
        try:
            api.create("/api/v1/persistentvolumes", volume)
        except Exception as error:  # noqa: BLE001 - already there (409) is the common case; the next loop retries others
            if getattr(error, "status", None) != 409:
                raise


def remove(pod_dir: Path) -> None:
    """A gone pod's volumes and root (not the shared folders they link to); its logs stay."""
    for part in ("volumes", "root"):
        shutil.rmtree(pod_dir / part, ignore_errors=True)
