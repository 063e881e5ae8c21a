"""Whether `pulumi up` updates a Kubernetes object in place or replaces it: a model from the sources.

- pulumi-kubernetes (provider/pkg/provider/diff.go @ 00302beb58ae08591f0c8b0b065871c50ba35250,
  `forceNewProperties`): a change replaces the object only at `.metadata.name`,
  `.metadata.namespace` and the per-kind paths of its `forceNew` table; the table has entries for
  apps, core, policy, rbac, storage and batch kinds only, so for a custom resource such as an
  ElasticJob (elastic.pytorch.org) every other change is an update in place. Its Diff reports each
  changed property as a detailed-diff path (`spec.replicaSpecs.Worker.template...`).
- the engine (pulumi/pulumi pkg/resource/deploy/step_generator.go @ 1a16857a44f16e46a9dce29f184c511062a70f80,
  `applyReplaceOnChanges`): a detailed-diff entry whose path lies under one of the resource's
  `replaceOnChanges` paths (`PropertyPath.Contains`) becomes a replacement; with
  `deleteBeforeReplace` the old object is deleted before the new one is created.
"""

from __future__ import annotations

from typing import Any

# diff.go: metadataForceNewProperties(".metadata") for every kind; nothing more for a custom resource.
FORCE_NEW_ALWAYS = (("metadata", "name"), ("metadata", "namespace"))


def changed_paths(old: Any, new: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The property paths where `old` and `new` differ (leaves, list indexes as ints)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            p
            for key in sorted(set(old) | set(new), key=str)
            for p in changed_paths(old.get(key), new.get(key), (*path, key))
        ]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for index, (a, b) in enumerate(zip(old, new)) for p in changed_paths(a, b, (*path, index))]
    return [] if old == new else [path]


def parse_path(text: str) -> tuple[Any, ...]:
    """A property path such as `spec.replicaSpecs` or `spec.items[0]` (the subset we write)."""
    parts: list[Any] = []
    for element in text.split("."):
        name, _, rest = element.partition("[")
        parts.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            parts.append(int(index) if index != "*" else "*")
            rest = rest.removeprefix("[")
    return tuple(parts)


def contains(prefix: tuple[Any, ...], path: tuple[Any, ...]) -> bool:
    """PropertyPath.Contains: `path` lies under `prefix` ("*" matches any element)."""
    return len(path) >= len(prefix) and all(a == "*" or a == b for a, b in zip(prefix, path))


def step(old: dict[str, Any], new: dict[str, Any], replace_on_changes: list[str]) -> str:
    """ "same", "update" or "replace" for a custom resource going from `old` to `new` inputs."""
    paths = changed_paths(old, new)
    if not paths:
        return "same"
    replace_paths = [*FORCE_NEW_ALWAYS, *(parse_path(p) for p in replace_on_changes)]
    if any(contains(prefix, path) for path in paths for prefix in replace_paths):
        return "replace"
    return "update"
