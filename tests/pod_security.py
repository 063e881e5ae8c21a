"""The Pod Security Standards, "baseline" and "restricted", control by control, as checks on a pod.

Source: https://kubernetes.io/docs/concepts/security/pod-security-standards/ (page
content/en/docs/concepts/security/pod-security-standards.md of kubernetes/website): each function
below is one control of that page, named as the page names it, with its Restricted Fields and
Allowed Values. Where the page is terse, the semantics follow the implementation the API server's
PodSecurity admission runs, kubernetes/pod-security-admission @ 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8,
policy/check_<id>.go (named in each docstring). Our namespaces pin no `enforce-version`, so the
latest version of each control applies.

A check returns the reasons the pod breaks its control (an empty list: it complies).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Pod = dict[str, Any]
Check = Callable[[Pod], list[str]]

BASELINE = "baseline"
RESTRICTED = "restricted"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _spec(pod: Pod) -> dict[str, Any]:
    return pod.get("spec", {})


def _pod_context(pod: Pod) -> dict[str, Any]:
    return _spec(pod).get("securityContext") or {}


def _containers(pod: Pod) -> Iterator[dict[str, Any]]:
    for key in CONTAINER_LISTS:
        yield from _spec(pod).get(key) or []


def _context(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _is_windows(pod: Pod) -> bool:
    return (_spec(pod).get("os") or {}).get("name") == "windows"


def _user_namespace(pod: Pod) -> bool:
    """hostUsers: false (a user namespace) exempts the root checks (check_runAsNonRoot.go, check_runAsUser.go)."""
    return _spec(pod).get("hostUsers") is False


# --- Baseline ----------------------------------------------------------------------------------


def host_process(pod: Pod) -> list[str]:
    """HostProcess: securityContext.windowsOptions.hostProcess of the pod and every container:
    undefined/nil or false (check_windowsHostProcess.go)."""
    holders = [("pod", _pod_context(pod))] + [(c["name"], _context(c)) for c in _containers(pod)]
    return [
        f"{who} sets windowsOptions.hostProcess=true"
        for who, ctx in holders
        if (ctx.get("windowsOptions") or {}).get("hostProcess") is True
    ]


def host_namespaces(pod: Pod) -> list[str]:
    """Host Namespaces: spec.hostNetwork, spec.hostPID, spec.hostIPC: undefined/nil or false."""
    return [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if _spec(pod).get(field) is True]


def privileged_containers(pod: Pod) -> list[str]:
    """Privileged Containers: securityContext.privileged: undefined/nil or false."""
    return [f"container {c['name']} is privileged" for c in _containers(pod) if _context(c).get("privileged") is True]


BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}


def capabilities_baseline(pod: Pod) -> list[str]:
    """Capabilities: securityContext.capabilities.add: undefined/nil or from the page's list."""
    return [
        f"container {c['name']} adds {cap}"
        for c in _containers(pod)
        for cap in (_context(c).get("capabilities") or {}).get("add") or []
        if cap not in BASELINE_CAPABILITIES
    ]


def hostpath_volumes(pod: Pod) -> list[str]:
    """HostPath Volumes: spec.volumes[*].hostPath: undefined/nil."""
    return [
        f"volume {v['name']} is a hostPath" for v in _spec(pod).get("volumes") or [] if v.get("hostPath") is not None
    ]


def host_ports(pod: Pod) -> list[str]:
    """Host Ports: ports[*].hostPort: undefined/nil or 0 (a known list is not supported by PodSecurity)."""
    return [
        f"container {c['name']} uses hostPort {p['hostPort']}"
        for c in _containers(pod)
        for p in c.get("ports") or []
        if p.get("hostPort", 0) != 0
    ]


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HOOKS = ("postStart", "preStop")


def host_probes_lifecycle_hooks(pod: Pod) -> list[str]:
    """Host Probes / Lifecycle Hooks (v1.34+): httpGet.host and tcpSocket.host of every probe and
    lifecycle hook: undefined/nil or "" (check_hostProbesAndhostLifecycle.go)."""
    found = []
    for c in _containers(pod):
        handlers = [(p, c.get(p) or {}) for p in PROBES]
        handlers += [(f"lifecycle.{h}", (c.get("lifecycle") or {}).get(h) or {}) for h in HOOKS]
        for where, handler in handlers:
            for kind in ("httpGet", "tcpSocket"):
                if (handler.get(kind) or {}).get("host", ""):
                    found.append(f"container {c['name']} {where}.{kind}.host is set")
    return found


APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def apparmor(pod: Pod) -> list[str]:
    """AppArmor: appArmorProfile.type undefined/nil, RuntimeDefault or Localhost; the annotation
    container.apparmor.security.beta.kubernetes.io/*: undefined, runtime/default or localhost/*."""
    found = []
    holders = [("pod", _pod_context(pod))] + [(c["name"], _context(c)) for c in _containers(pod)]
    for who, ctx in holders:
        kind = (ctx.get("appArmorProfile") or {}).get("type")
        if kind is not None and kind not in ("RuntimeDefault", "Localhost"):
            found.append(f"{who} sets appArmorProfile.type={kind}")
    for key, value in (pod.get("metadata", {}).get("annotations") or {}).items():
        if (
            key.startswith(APPARMOR_ANNOTATION)
            and value not in ("", "runtime/default")
            and not value.startswith("localhost/")
        ):
            found.append(f"annotation {key}={value}")
    return found


SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def selinux(pod: Pod) -> list[str]:
    """SELinux: seLinuxOptions.type undefined/"" or container_t, container_init_t, container_kvm_t,
    container_engine_t (1.31+); seLinuxOptions.user and .role undefined/""."""
    found = []
    holders = [("pod", _pod_context(pod))] + [(c["name"], _context(c)) for c in _containers(pod)]
    for who, ctx in holders:
        options = ctx.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            found.append(f"{who} sets seLinuxOptions.type={options['type']}")
        found += [f"{who} sets seLinuxOptions.{field}" for field in ("user", "role") if options.get(field, "")]
    return found


def proc_mount_type(pod: Pod) -> list[str]:
    """/proc Mount Type: securityContext.procMount undefined/nil or Default (any value in a user
    namespace, check_procMount_baseline.go)."""
    if _user_namespace(pod):
        return []
    return [
        f"container {c['name']} sets procMount={_context(c)['procMount']}"
        for c in _containers(pod)
        if _context(c).get("procMount", "Default") != "Default"
    ]


SECCOMP_ALLOWED = ("RuntimeDefault", "Localhost")


def seccomp_baseline(pod: Pod) -> list[str]:
    """Seccomp: seccompProfile.type of the pod and every container: undefined/nil, RuntimeDefault or
    Localhost, i.e. never explicitly Unconfined."""
    holders = [("pod", _pod_context(pod))] + [(c["name"], _context(c)) for c in _containers(pod)]
    return [
        f"{who} sets seccompProfile.type={(ctx.get('seccompProfile') or {}).get('type')}"
        for who, ctx in holders
        if ctx.get("seccompProfile") is not None and ctx["seccompProfile"].get("type") not in SECCOMP_ALLOWED
    ]


SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}


def sysctls(pod: Pod) -> list[str]:
    """Sysctls: spec.securityContext.sysctls[*].name undefined/nil or one of the page's safe set."""
    return [f"sysctl {s['name']}" for s in _pod_context(pod).get("sysctls") or [] if s["name"] not in SAFE_SYSCTLS]


# --- Restricted (everything from baseline, plus) -------------------------------------------------

RESTRICTED_VOLUME_SOURCES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def volume_types(pod: Pod) -> list[str]:
    """Volume Types: every spec.volumes[*] must set one of configMap, csi, downwardAPI, emptyDir,
    ephemeral, persistentVolumeClaim, projected, secret."""
    return [
        f"volume {v['name']} is not one of the allowed types"
        for v in _spec(pod).get("volumes") or []
        if not RESTRICTED_VOLUME_SOURCES & {key for key, value in v.items() if value is not None}
    ]


def privilege_escalation(pod: Pod) -> list[str]:
    """Privilege Escalation (v1.8+): securityContext.allowPrivilegeEscalation must be false (Linux only)."""
    if _is_windows(pod):
        return []
    return [
        f"container {c['name']} does not set allowPrivilegeEscalation=false"
        for c in _containers(pod)
        if _context(c).get("allowPrivilegeEscalation") is not False
    ]


def running_as_non_root(pod: Pod) -> list[str]:
    """Running as Non-root: runAsNonRoot must be true; a container may leave it undefined when the
    pod sets it true; none may set it false (check_runAsNonRoot.go)."""
    if _user_namespace(pod):
        return []
    pod_level = _pod_context(pod).get("runAsNonRoot")
    found = ["pod sets runAsNonRoot=false"] if pod_level is False else []
    for c in _containers(pod):
        value = _context(c).get("runAsNonRoot")
        if value is False or (value is None and pod_level is not True):
            found.append(f"container {c['name']} does not run as non-root (runAsNonRoot={value})")
    return found


def running_as_non_root_user(pod: Pod) -> list[str]:
    """Running as Non-root user (v1.23+): runAsUser of the pod and every container: any non-zero value
    or undefined/null."""
    if _user_namespace(pod):
        return []
    holders = [("pod", _pod_context(pod))] + [(c["name"], _context(c)) for c in _containers(pod)]
    return [f"{who} sets runAsUser=0" for who, ctx in holders if ctx.get("runAsUser") == 0]


def seccomp_restricted(pod: Pod) -> list[str]:
    """Seccomp (v1.19+): the profile must be explicitly RuntimeDefault or Localhost, on the pod or on
    every container; neither Unconfined nor an absent profile (Linux only; check_seccompProfile_restricted.go)."""
    if _is_windows(pod):
        return []
    pod_profile = (_pod_context(pod).get("seccompProfile") or {}).get("type")
    found = [f"pod sets seccompProfile.type={pod_profile}"] if pod_profile not in (None, *SECCOMP_ALLOWED) else []
    for c in _containers(pod):
        profile = (_context(c).get("seccompProfile") or {}).get("type")
        if profile is None and pod_profile not in SECCOMP_ALLOWED:
            found.append(f"neither the pod nor container {c['name']} sets seccompProfile.type")
        elif profile is not None and profile not in SECCOMP_ALLOWED:
            found.append(f"container {c['name']} sets seccompProfile.type={profile}")
    return found


def capabilities_restricted(pod: Pod) -> list[str]:
    """Capabilities (v1.22+): capabilities.drop must include ALL; capabilities.add only
    NET_BIND_SERVICE (Linux only)."""
    if _is_windows(pod):
        return []
    found = []
    for c in _containers(pod):
        capabilities = _context(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"container {c['name']} does not drop ALL capabilities")
        found += [
            f"container {c['name']} adds {cap}" for cap in capabilities.get("add") or [] if cap != "NET_BIND_SERVICE"
        ]
    return found


# Control name, exactly as the page names it -> check, per level ("restricted" is "everything from
# the Baseline policy" plus its own controls; two of them share a name with a baseline control and
# carry the page's version suffix).
BASELINE_CONTROLS: dict[str, Check] = {
    "HostProcess": host_process,
    "Host Namespaces": host_namespaces,
    "Privileged Containers": privileged_containers,
    "Capabilities": capabilities_baseline,
    "HostPath Volumes": hostpath_volumes,
    "Host Ports": host_ports,
    "Host Probes / Lifecycle Hooks (v1.34+)": host_probes_lifecycle_hooks,
    "AppArmor": apparmor,
    "SELinux": selinux,
    "/proc Mount Type": proc_mount_type,
    "Seccomp": seccomp_baseline,
    "Sysctls": sysctls,
}
RESTRICTED_CONTROLS: dict[str, Check] = {
    "Volume Types": volume_types,
    "Privilege Escalation (v1.8+)": privilege_escalation,
    "Running as Non-root": running_as_non_root,
    "Running as Non-root user (v1.23+)": running_as_non_root_user,
    "Seccomp (v1.19+)": seccomp_restricted,
    "Capabilities (v1.22+)": capabilities_restricted,
}
LEVELS = {BASELINE: BASELINE_CONTROLS, RESTRICTED: {**BASELINE_CONTROLS, **RESTRICTED_CONTROLS}}


def violations(pod: Pod, level: str) -> dict[str, list[str]]:
    """Control name -> reasons, for every control of `level` that the pod breaks."""
    if level == "privileged":
        return {}
    found = {name: check(pod) for name, check in LEVELS[level].items()}
    return {name: reasons for name, reasons in found.items() if reasons}
