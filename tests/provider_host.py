"""The Pulumi engine's side of a dynamic provider: where it starts the provider host, how the host's
launcher picks its Python, and a gRPC client that talks to the host as the engine does.

No Pulumi CLI runs here, so the engine and the launcher script are modelled, line by line, from
pulumi/pulumi at PULUMI_COMMIT (3.260.0-dev; our pin is 3.272.0). The host itself is real: the
installed SDK's `python -m pulumi.dynamic`, driven over gRPC with the SDK's own generated stubs.

  pkg/engine/project.go                 getPwdMain: a `main` directory becomes the working
                                        directory (pwd); a `main` file, its folder; none, the root
  pkg/engine/deployment.go              plugin.NewContextWithRoot(..., pwd, projinfo.Root,
                                        Runtime.Options(), ...): plugins get that pwd
  sdk/go/common/resource/plugin/plugin.go            ExecPlugin: cmd.Dir = pwd
  sdk/go/common/resource/plugin/provider_plugin.go   NewProvider: every runtime option becomes
                                        PULUMI_RUNTIME_<OPTION>=fmt.Sprintf("%v", v), plus
                                        PULUMI_PROJECT, PULUMI_CONFIG, over the engine's own
                                        environment; the plugin's argument is the engine address
  sdk/python/dist/pulumi-resource-pulumi-python     the launcher (modelled in launcher_command)
  sdk/python/toolchain/pip.go           resolveVirtualEnvironmentPath(root, virtualenv): the
                                        language host resolves the same option against the root
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

PULUMI_COMMIT = "1b5949891b3cefcb9974752b24a5ecef0acc86c8"
PROVIDER_KEY = "__provider"  # pulumi/dynamic/__main__.py PROVIDER_KEY


class ProjectError(Exception):
    """The engine refuses the project before any plugin starts."""


class LauncherExit(Exception):
    """pulumi-resource-pulumi-python printed this to stderr and exited 1: no provider host."""


def engine_pwd(root: Path, project: dict[str, Any]) -> Path:
    """pkg/engine/project.go getPwdMain(root, proj.Main): the working directory of the language
    host and of every plugin the engine starts."""
    main = project.get("main") or ""
    if main == "":
        return root
    path = Path(main) if os.path.isabs(main) else Path(os.path.normpath(root / main))  # filepath.Clean(Join)
    if not path.exists():
        raise ProjectError(f"project 'main' could not be read: stat {path}: no such file or directory")
    return path if path.is_dir() else path.parent


def language_host_virtualenv(root: Path, project: dict[str, Any]) -> Path:
    """sdk/python/toolchain/pip.go resolveVirtualEnvironmentPath: relative to the project root."""
    virtualenv = project["runtime"]["options"]["virtualenv"]
    return Path(virtualenv) if os.path.isabs(virtualenv) else root / virtualenv


def plugin_environment(project: dict[str, Any], base: dict[str, str], config: dict[str, str]) -> dict[str, str]:
    """provider_plugin.go NewProvider: options as PULUMI_RUNTIME_*, unresolved, over the engine's
    environment (JoinStore(optionsStore, baseStore): the options win)."""
    options = {
        f"PULUMI_RUNTIME_{key.upper()}": _go_format(value)
        for key, value in project["runtime"].get("options", {}).items()
    }
    return {**base, **options, "PULUMI_PROJECT": project["name"], "PULUMI_CONFIG": json.dumps(config)}


def _go_format(value: Any) -> str:
    """fmt.Sprintf("%v", v) for the option values a Pulumi.yaml can hold here."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def launcher_command(pwd: Path, env: dict[str, str], args: list[str]) -> tuple[list[str], dict[str, str]]:
    """sdk/python/dist/pulumi-resource-pulumi-python, line by line: the command it execs and its
    environment, or LauncherExit with the message it prints."""
    env = dict(env)
    virtualenv = env.get("PULUMI_RUNTIME_VIRTUALENV", "")
    # if [ -z "${PULUMI_RUNTIME_VIRTUALENV:-}" ]; then uv -> ".venv"; poetry -> $(poetry env info --path)
    if not virtualenv:
        toolchain = env.get("PULUMI_RUNTIME_TOOLCHAIN", "")
        if toolchain == "uv":
            virtualenv = ".venv"
        elif toolchain == "poetry":
            raise NotImplementedError("poetry's virtualenv comes from `poetry env info --path`: not modelled")
    if virtualenv:
        virtualenv = virtualenv[:-1] if virtualenv.endswith("/") else virtualenv  # ${VAR%/}
        if not virtualenv.startswith("/"):
            # $PWD is the launcher's working directory: the engine's cmd.Dir, i.e. pwd.
            virtualenv = f"{pwd}/{virtualenv}"
        if os.path.isfile(f"{virtualenv}/bin/python"):  # [ -f ... ] follows symbolic links
            env["PATH"] = f"{virtualenv}/bin:{env.get('PATH', '')}"
            env.pop("PYTHONHOME", None)
            return [f"{virtualenv}/bin/python", "-u", "-m", "pulumi.dynamic", *args], env
        if os.path.isdir(virtualenv):
            raise LauncherExit(
                f"The 'virtualenv' option in Pulumi.yaml is set to \"{virtualenv}\", but "
                f"\"{virtualenv}\" doesn't appear to be a virtual environment."
            )
        raise LauncherExit(
            f"The 'virtualenv' option in Pulumi.yaml is set to \"{virtualenv}\", but \"{virtualenv}\" doesn't exist."
        )
    return [env.get("PULUMI_PYTHON_CMD", "python3"), "-u", "-m", "pulumi.dynamic", *args], env


@dataclass
class ProviderHost:
    """A running `python -m pulumi.dynamic` and a client for it."""

    process: subprocess.Popen
    stub: provider_pb2_grpc.ResourceProviderStub
    channel: grpc.Channel
    stderr: Path

    def stop(self) -> None:
        self.channel.close()
        self.process.kill()
        self.process.wait(timeout=30)


def start_provider_host(
    root: Path, project: dict[str, Any], base_env: dict[str, str], stderr: Path, config: dict[str, str] | None = None
) -> ProviderHost:
    """Start the host where and as the engine would, and connect to the port it prints."""
    pwd = engine_pwd(root, project)
    env = plugin_environment(project, base_env, config or {})
    command, env = launcher_command(pwd, env, ["127.0.0.1:1"])  # the engine address (unused by the host)
    with stderr.open("wb") as err:
        process = subprocess.Popen(command, cwd=pwd, env=env, stdout=subprocess.PIPE, stderr=err)
    line = process.stdout.readline().decode().strip()  # __main__.py main(): the port, then serve
    if not line.isdigit():
        process.kill()
        raise RuntimeError(f"provider host printed {line!r}, stderr:\n{stderr.read_text(errors='replace')[-3000:]}")
    channel = grpc.insecure_channel(f"127.0.0.1:{line}")
    grpc.channel_ready_future(channel).result(timeout=30)
    return ProviderHost(process, provider_pb2_grpc.ResourceProviderStub(channel), channel, stderr)


def to_struct(properties: dict[str, Any]) -> struct_pb2.Struct:
    """Properties as the engine sends them to a provider that does not accept secrets (the host's
    Configure answers acceptSecrets=False): plain values."""
    return asyncio.run(rpc.serialize_properties(properties, {}))


def from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    return rpc.deserialize_properties(struct)


def configure(host: ProviderHost) -> provider_pb2.ConfigureResponse:
    return host.stub.Configure(
        provider_pb2.ConfigureRequest(args=to_struct({}), acceptSecrets=True, acceptResources=True)
    )


def plugin_version(host: ProviderHost) -> str:
    return host.stub.GetPluginInfo(empty_pb2.Empty()).version
