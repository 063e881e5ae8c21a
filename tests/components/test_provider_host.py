"""The training wait's dynamic provider, run by the SDK's real provider host, started as the engine
starts it (upstream-facts-2.md, facts 1-4).

The engine starts every plugin in the project's `main` directory, and the launcher
`pulumi-resource-pulumi-python` resolves `virtualenv: .venv` against that directory: with
`main: infra/` it looked for `infra/.venv`, exited 1, and every preview, up and destroy failed at
the first ElasticJobCompletion. tests/provider_host.py models the engine and the launcher from
pulumi/pulumi @ 1b5949891b (each function names its file); the host, `python -m pulumi.dynamic` of
the installed SDK, runs for real and is driven over gRPC with the SDK's stubs, against the HTTPS
API server of tests/components/test_completion_http.py.

Where `import infra` comes from: the launcher runs `python -u -m pulumi.dynamic`, and `-m` puts
the working directory first on sys.path (Python docs, "Command line and environment", -m), so the
host imports the checkout's own `infra/` from the project root. The venv built here holds the
dependencies only, not the project, so nothing else could provide it; with the shared venv (an
editable install of another checkout) the root still wins, because the editable finder comes after
sys.path's PathFinder on sys.meta_path (setuptools' __editable___*_finder.py install() appends).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import grpc
import pulumi
import pytest
import yaml
from packaging.requirements import Requirement
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2

from infra.components import completion
from infra.cli.mocks import RecordingMocks
from provider_host import (
    PROVIDER_KEY,
    LauncherExit,
    configure,
    engine_pwd,
    from_struct,
    language_host_virtualenv,
    launcher_command,
    plugin_environment,
    plugin_version,
    start_provider_host,
    to_struct,
)
from synth_support import REPO
from test_completion_http import JOB_LABEL, NAME, NAMESPACE, SPEC_HASH, _elasticjob, _pod, cluster_env  # noqa: F401 - fixture

URN = "urn:pulumi:dev::elastic-training::pulumi-python:dynamic:Resource::training-complete"


def the_project(root: Path = REPO) -> dict:
    return yaml.safe_load((root / "Pulumi.yaml").read_text())


def completion_inputs(kubeconfig: str) -> dict:
    """What the program registers for the wait, as the SDK builds it (the provider pickled by
    pulumi/dynamic/dynamic.py serialize_provider), with secrets unwrapped as the engine sends them to
    a provider that does not accept secrets."""
    # A loop of its own: the SDK's mocks and pulumi.runtime.test use the current one, and a test run
    # alone may find none (an asyncio.run earlier in the process leaves the policy with None).
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = RecordingMocks("elastic-training", "dev", "us-west-2")
    mocks.install()
    found: dict = {}

    @pulumi.runtime.test
    def register():
        resource = completion.ElasticJobCompletion(
            "training-complete",
            kubeconfig=kubeconfig,
            namespace=NAMESPACE,
            elasticjob_name=NAME,
            job_label=JOB_LABEL,
            timeout_seconds=3600,
            spec_hash=SPEC_HASH,
        )
        return resource.urn.apply(
            lambda _: found.update(next(r for r in mocks.registrations if r.name == "training-complete").inputs)
        )

    register()
    secret = rpc._special_secret_sig
    return {
        key: value["value"] if isinstance(value, dict) and value.get(rpc._special_sig_key) == secret else value
        for key, value in found.items()
    }


def make_checkout(directory: Path) -> Path:
    """A clone as a user has it: the project file, the program, the `infra` package and the contract it
    imports (`elastic_training`)."""
    directory.mkdir()
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, directory / name)
    for package in ("infra", "elastic_training"):
        shutil.copytree(REPO / package, directory / package, ignore=shutil.ignore_patterns("__pycache__"))
    return directory


def _closure(requirements: list[str]) -> set[str]:
    """Distribution names the requirements pull in, transitively, as installed here."""
    seen: set[str] = set()
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        name = _normal(requirement.name)
        if name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        todo += [Requirement(text) for text in importlib.metadata.requires(requirement.name) or []]
    return seen


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def infra_extra_venv(path: Path) -> Path:
    """A virtualenv holding exactly the `infra` extra of pyproject.toml and its dependencies (linked
    from this venv's installed files), and not the project: what `pip install .[infra]` would give
    minus the project itself, so `infra` can only come from the host's sys.path."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    (own,) = [Path(p) for p in site.getsitepackages() if p.startswith(sys.prefix)]
    target = path / own.relative_to(sys.prefix)
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["infra"]
    wanted = _closure(extra)
    for dist in importlib.metadata.distributions():
        if _normal(dist.metadata["Name"]) not in wanted:
            continue
        for top in {file.parts[0] for file in dist.files or []}:
            source = Path(dist.locate_file(top))
            if top in ("..", "__pycache__") or top.endswith(".pth") or not source.exists() or (target / top).exists():
                continue  # scripts outside site-packages; .pth hooks (the editable finder among them)
            (target / top).symlink_to(source)
    return path


def user_environment() -> dict[str, str]:
    """The environment the engine passes on: the user's shell (no PYTHONPATH there; the suite's
    own PYTHONPATH would otherwise decide where `infra` comes from)."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}


def imported_from(stderr: Path, package: str) -> set[str]:
    """Files a PYTHONVERBOSE=1 process says it loaded the package's __init__ from."""
    text = stderr.read_text(errors="replace")
    return set(re.findall(rf"(/\S+/{package}/__init__\.py)\b", text))


# --- where the engine starts the host -----------------------------------------------------------


def test_the_launcher_finds_the_virtualenv_the_language_host_uses(tmp_path):
    """Fails with `main: infra/` (today's main): pwd becomes infra/ and the launcher exits 1."""
    root = make_checkout(tmp_path / "checkout")
    infra_extra_venv(root / ".venv")
    project = the_project(root)
    pwd = engine_pwd(root, project)
    command, env = launcher_command(pwd, plugin_environment(project, user_environment(), {}), ["127.0.0.1:1"])
    assert pwd == root
    assert Path(command[0]).parent.parent == language_host_virtualenv(root, project) == root / ".venv"
    assert command[1:4] == ["-u", "-m", "pulumi.dynamic"]
    assert env["PATH"].startswith(f"{root}/.venv/bin:") and env["PULUMI_RUNTIME_VIRTUALENV"] == ".venv"


def test_a_main_directory_sends_the_launcher_to_a_virtualenv_that_does_not_exist(tmp_path):
    """What every preview, up and destroy did before (fact 3): the model on the old Pulumi.yaml."""
    root = make_checkout(tmp_path / "checkout")
    infra_extra_venv(root / ".venv")
    project = {**the_project(root), "main": "infra/"}
    pwd = engine_pwd(root, project)
    assert pwd == root / "infra"
    with pytest.raises(LauncherExit) as exit_:
        launcher_command(pwd, plugin_environment(project, user_environment(), {}), [])
    venv = f"{root}/infra/.venv"
    assert (
        str(exit_.value)
        == f"The 'virtualenv' option in Pulumi.yaml is set to \"{venv}\", but \"{venv}\" doesn't exist."
    )


# --- the real host -----------------------------------------------------------------------------


@pytest.fixture
def host_in(tmp_path):
    """host_in(root, **env) -> a running provider host for that checkout, stopped at teardown."""
    hosts = []

    def start(root: Path, **extra_env: str):
        host = start_provider_host(
            root, the_project(root), {**user_environment(), **extra_env}, tmp_path / f"host-{len(hosts)}.stderr"
        )
        hosts.append(host)
        return host

    yield start
    for host in hosts:
        host.stop()


def test_the_host_loads_our_provider_and_returns_the_verdict(cluster_env, host_in, tmp_path):
    start, _ = cluster_env
    succeeded = (200, _elasticjob(("Succeeded", "True", "ElasticJobSucceeded")))
    server, kubeconfig = start([succeeded], [_pod(0, "Succeeded", 0), _pod(1, "Succeeded", 0)], [])
    root = make_checkout(tmp_path / "checkout")
    infra_extra_venv(root / ".venv")
    inputs = completion_inputs(kubeconfig)
    host = host_in(root, PYTHONVERBOSE="1")

    assert plugin_version(host) == "0.1.0"
    assert configure(host).acceptSecrets is False  # so the engine sends secrets as plain values
    checked = host.stub.Check(provider_pb2.CheckRequest(urn=URN, olds=to_struct({}), news=to_struct(inputs)))
    assert list(checked.failures) == [] and from_struct(checked.inputs) == inputs
    created = host.stub.Create(provider_pb2.CreateRequest(urn=URN, properties=checked.inputs, timeout=3900))
    outs = from_struct(created.properties)
    assert created.id == f"{NAMESPACE}/{NAME}"
    assert outs["result"] == f"ElasticJob {NAMESPACE}/{NAME} succeeded"
    assert outs[PROVIDER_KEY] == inputs[PROVIDER_KEY]
    assert [token for *_, token in server.requests] and None not in [token for *_, token in server.requests]

    same = host.stub.Diff(
        provider_pb2.DiffRequest(id=created.id, urn=URN, olds=created.properties, news=checked.inputs)
    )
    assert same.changes == provider_pb2.DiffResponse.DIFF_NONE
    changed = host.stub.Diff(
        provider_pb2.DiffRequest(
            id=created.id,
            urn=URN,
            olds=created.properties,
            news=to_struct({**inputs, "specHash": "--rdzv_id=run-1-def"}),
        )
    )
    assert changed.changes == provider_pb2.DiffResponse.DIFF_SOME
    assert list(changed.replaces) == ["specHash"] and changed.deleteBeforeReplace
    host.stub.Delete(provider_pb2.DeleteRequest(id=created.id, urn=URN, properties=created.properties))

    # The only `infra` the host could import is the checkout's: from its working directory.
    assert imported_from(host.stderr, "infra") == {f"{root}/infra/__init__.py"}


def test_a_failed_run_fails_create_with_the_verdict(cluster_env, host_in, tmp_path):
    start, _ = cluster_env
    failed_pod = f"{NAME}-1-abcde"
    failed = (
        200,
        _elasticjob(
            ("Running", "False", "ElasticJobFinished"),
            ("Failed", "True", "FailedIndexes"),
            last_failure={
                "pod": failed_pod,
                "index": 1,
                "exitCode": 1,
                "reason": "Error",
                "action": "counted against the retry limit",
            },
        ),
    )
    log = "".join(f"step {i}\n" for i in range(25)) + "ValueError: bad batch\n"
    _, kubeconfig = start([failed], [_pod(0, "Running"), _pod(1, "Failed", 1)], [], {failed_pod: log})
    root = make_checkout(tmp_path / "checkout")
    infra_extra_venv(root / ".venv")
    host = host_in(root)
    configure(host)

    with pytest.raises(grpc.RpcError) as failure:
        host.stub.Create(provider_pb2.CreateRequest(urn=URN, properties=to_struct(completion_inputs(kubeconfig))))
    # What the engine prints after "error: " (rpcerror Error(): the status message), item 13: the job
    # and the reason on one line, then the worker's last log lines; no traceback.
    assert failure.value.code() == grpc.StatusCode.UNKNOWN
    first, *rest = failure.value.details().rstrip("\n").split("\n")
    assert first == (
        f"TrainingFailed: ElasticJob {NAMESPACE}/{NAME} failed: FailedIndexes: ElasticJob {NAME} is failed.; "
        f"last failure: worker {failed_pod} (index 1) exited 1 (Error, counted against the retry limit). "
        f"The ElasticJob {NAMESPACE}/{NAME} was deleted, so its pods stop (run `pulumi up --refresh` to "
        f"create it again)"
    )
    assert rest == [f"Last 20 lines of {failed_pod}'s log:", *log.splitlines()[-20:]]


def test_the_checkout_wins_over_an_editable_install_of_another_checkout(cluster_env, host_in, tmp_path):
    """This suite's venv holds an editable install (a checkout elsewhere): the host still runs the
    code of the checkout it was started in."""
    start, _ = cluster_env
    _, kubeconfig = start([(200, _elasticjob(("Succeeded", "True", "ElasticJobSucceeded")))], [], [])
    finder = [dist for dist in importlib.metadata.distributions() if dist.metadata["Name"] == "elastic-training"]
    assert finder, "the suite's venv has no install of the project: nothing to compare against"
    root = make_checkout(tmp_path / "checkout")
    (root / ".venv").symlink_to(sys.prefix)
    host = host_in(root, PYTHONVERBOSE="1")
    configure(host)
    host.stub.Check(
        provider_pb2.CheckRequest(urn=URN, olds=to_struct({}), news=to_struct(completion_inputs(kubeconfig)))
    )
    assert imported_from(host.stderr, "infra") == {f"{root}/infra/__init__.py"}


# --- what the README's setup gives the host ------------------------------------------------------


def test_the_readme_setup_gives_the_host_its_virtualenv_and_imports():
    """README step 1 runs scripts/setup.sh; it makes `.venv` (Pulumi.yaml's virtualenv) at the
    project root, where the launcher now looks, and installs the `infra` extra: exactly what the
    hosts above ran with (infra_extra_venv), `infra` itself coming from the root."""
    readme = (REPO / "README.md").read_text()
    quick_start = readme[readme.index("## Two commands on a fresh machine") :]
    first_block = re.search(r"```sh\n(.*?)```", quick_start, flags=re.S)[1]
    assert "bash scripts/setup.sh" in first_block
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'cd "$(dirname "$0")/.."' in setup  # the root, whatever the caller's directory
    venv = the_project()["runtime"]["options"]["virtualenv"]
    assert re.search(rf"-m venv {re.escape(venv)}\n", setup)
    (extras,) = re.findall(rf'{re.escape(venv)}/bin/python -m pip install .* -e "\.\[([a-z,]+)\]"', setup)
    assert "infra" in extras.split(",")
    assert engine_pwd(REPO, the_project()) / venv == language_host_virtualenv(REPO, the_project())
