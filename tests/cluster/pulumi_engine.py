"""The real Pulumi engine on this project: the CLI built from source (scripts/build-tools.sh), the local
file backend in a temporary directory, a passphrase, and the project's own Pulumi.yaml and program.

Why the automation API, and what it changes. `pulumi up` launches a program through the Go Python language
host, `pulumi-language-python`, a module the Go module proxy does not serve (scripts/tools.env). The
Python SDK carries its own language host: an inline program of `pulumi.automation` is served by
`LanguageServer` (pulumi/automation/_server.py in the pip `pulumi`, the LanguageRuntime gRPC service: `Run`
calls the program inside `run_in_stack`, as pulumi-language-python-exec does), and `Stack.up`/`preview`/
`refresh`/`destroy` (pulumi/automation/_stack.py) start the real CLI with `--client=127.0.0.1:<port>` so
that the engine asks that server to run the program instead of starting a language host. Everything else
is the engine's own: it reads Pulumi.yaml and the stack file, keeps the state, diffs, and starts the
plugins itself: `pulumi-resource-kubernetes` (found on PATH: pulumi/pulumi sdk/go/common/workspace/
plugins.go, ambient plugins) and the dynamic providers' host `pulumi-resource-pulumi-python`, which runs
`python -m pulumi.dynamic` from the project's `virtualenv: .venv` in the project directory. The one part
played here is the language host; the program it runs is the project's `__main__.py`, unchanged.

One consequence, handled here: with `--client` the CLI replaces the project's runtime options with
`{"address": ...}` (pkg/cmd/pulumi/operations/io.go readProjectForUpdate, pulumi v3.274.0), so the engine
no longer hands the dynamic providers' host `PULUMI_RUNTIME_VIRTUALENV` and the rest (sdk/go/common/
resource/plugin/provider_plugin.go: each runtime option as `PULUMI_RUNTIME_<OPTION>`), and the shim would
fall back to `python3` from PATH. The CLI's environment carries them instead, with the values read from
the project's own Pulumi.yaml: the same variables, the same relative `.venv`, resolved by the shim against
the directory the engine starts it in, as under `pulumi up`.

The project directory is a copy made of links: every entry of the checkout links to the real one, except
`stacks/`, which holds a copy of the stack's file, so that `pulumi config set` and `pulumi stack init`
(which writes the passphrase's salt into the stack file) never touch the checkout.
"""

from __future__ import annotations

import os
import runpy
import shutil

import yaml
from dataclasses import dataclass, field
from pathlib import Path

from pulumi import automation as auto

from synth_support import REPO

PASSPHRASE = "cluster-tier-engine-test"
# Not linked into the project copy: the stack files (copied instead) and any state or VCS data.
NOT_LINKED = {"stacks", ".git", ".pulumi-state"}


def runtime_option_variables(project_file: Path) -> dict[str, str]:
    """What the engine would set for a plugin from the project's runtime options (provider_plugin.go)."""
    runtime = yaml.safe_load(project_file.read_text())["runtime"]
    options = (runtime.get("options") or {}) if isinstance(runtime, dict) else {}
    # Go's %v: booleans as true/false.
    return {
        f"PULUMI_RUNTIME_{key.upper()}": str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in options.items()
    }


@dataclass
class Outcome:
    """What one CLI command printed, and whether it succeeded."""

    ok: bool
    output: str
    result: object = None
    lines: list[str] = field(default_factory=list)


class EngineProject:
    """One stack of the project, run by the real CLI with its state in `home`."""

    def __init__(self, home: Path, tools_bin: Path, stack: str):
        self.directory = home / "project"
        self.directory.mkdir(parents=True)
        for entry in REPO.iterdir():
            if entry.name not in NOT_LINKED:
                (self.directory / entry.name).symlink_to(entry)
        (self.directory / "stacks").mkdir()
        shutil.copy(REPO / "stacks" / f"Pulumi.{stack}.yaml", self.directory / "stacks")
        (home / "state").mkdir()
        self.env = {
            "PATH": f"{tools_bin}{os.pathsep}{os.environ['PATH']}",
            "PULUMI_HOME": str(home / "pulumi-home"),
            "PULUMI_BACKEND_URL": f"file://{home / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            # Plugins come from PATH (the cache's bin) or nowhere: never a download, never an update check.
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            **runtime_option_variables(self.directory / "Pulumi.yaml"),
        }
        workspace = auto.LocalWorkspace(
            work_dir=str(self.directory),
            env_vars=self.env,
            program=self.program,
            pulumi_command=auto.PulumiCommand(root=str(tools_bin.parent)),
        )
        self.stack = auto.Stack.create(stack, workspace)

    def program(self) -> None:
        """What pulumi-language-python-exec runs for a project without `main`: its `__main__.py`."""
        runpy.run_path(str(self.directory / "__main__.py"), run_name="__main__")

    def set_config(self, values: dict[str, str]) -> None:
        self.stack.set_all_config({key: auto.ConfigValue(value) for key, value in values.items()})

    def run(self, command: str, **options) -> Outcome:
        """`preview`, `up`, `refresh` or `destroy`, with everything the CLI printed."""
        lines: list[str] = []
        try:
            result = getattr(self.stack, command)(
                on_output=lines.append, on_error=lines.append, color="never", **options
            )
        except auto.errors.CommandError as error:
            return Outcome(False, "\n".join(lines) + f"\n{error}", error, lines)
        return Outcome(True, "\n".join(lines), result, lines)
