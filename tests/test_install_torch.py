"""scripts/setup.sh installs the CPU build of torch on Linux x86-64 unless asked for the GPU build.

PyPI's torch for Linux x86-64 is the CUDA build (multi-GB); PyTorch's CPU index serves
`torch-2.13.0+cpu`. scripts/install-torch.sh (called by setup.sh) chooses: `torch==2.13.0+cpu` with
the CPU index by default there, `torch===2.13.0` (PEP 440 arbitrary equality, so no `+cpu` build
matches) with `--gpu`, PyPI's `torch==2.13.0` elsewhere, and keeps a torch 2.13.0 already installed.

Real pip installs here, into a throwaway venv, from two local `file://` simple indexes standing in
for PyPI (a plain 2.13.0) and the CPU index (2.13.0+cpu): small wheels made by the test, so no
network is used and the machine's own pip configuration (find-links, extra indexes) is switched off
with PIP_CONFIG_FILE=/dev/null (pip docs, "Configuration": os.devnull loads no file). A fake `uname`
first on PATH stands for the platform.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import re
import site
import subprocess
import sys
import threading
import tomllib
import zipfile
from pathlib import Path

import pytest

from infra import versions
from synth_support import REPO

SCRIPT = REPO / "scripts" / "install-torch.sh"


def torch_pin() -> str:
    jobs = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["jobs"]
    (pin,) = [r.split("==")[1] for r in jobs if r.startswith("torch==")]
    return pin


def _wheel(directory: Path, version: str) -> str:
    """A minimal torch wheel (PEP 427): a package and its dist-info, recorded with hashes."""
    name = f"torch-{version}-py3-none-any.whl"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        f"torch-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"torch-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
        f"{len(text.encode())}"
        for path, text in files.items()
    ]
    files[f"torch-{version}.dist-info/RECORD"] = "\n".join(record + [f"torch-{version}.dist-info/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / name, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return name


def simple_index(root: Path, version: str) -> str:
    """A PEP 503 index with one torch wheel; its file:// URL."""
    project = root / "simple" / "torch"
    project.mkdir(parents=True)
    wheel = _wheel(project, version)
    (project / "index.html").write_text(f'<a href="{wheel.replace("+", "%2B")}">{wheel}</a>\n')
    return (root / "simple").as_uri()


@pytest.fixture
def world(tmp_path):
    """run(venv, system, *args) -> CompletedProcess of install-torch.sh for that venv's python."""
    pypi = simple_index(tmp_path / "pypi", torch_pin())
    cpu = simple_index(tmp_path / "cpu", f"{torch_pin()}+cpu")

    def run(venv: Path, system: tuple[str, str], *args: str, **env: str) -> subprocess.CompletedProcess:
        bin_dir = tmp_path / f"uname-{'-'.join(system)}"
        if not bin_dir.exists():
            bin_dir.mkdir()
            (bin_dir / "uname").write_text(
                f'#!/bin/sh\ncase "$1" in -s) echo {system[0]};; -m) echo {system[1]};; esac\n'
            )
            (bin_dir / "uname").chmod(0o755)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        clean.update(
            {
                "PATH": f"{bin_dir}:{os.environ['PATH']}",
                "PIP_CONFIG_FILE": os.devnull,
                "PIP_INDEX_URL": pypi,
                "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "TORCH_CPU_INDEX": cpu,
                **env,
            }
        )
        return subprocess.run(
            ["bash", str(SCRIPT), str(venv / "bin" / "python"), *args, "--", "--quiet"],
            capture_output=True,
            text=True,
            env=clean,
            timeout=300,
        )

    def venv(name: str) -> Path:
        """A bare venv with this venv's pip linked in (ensurepip takes seconds; pip is self-contained)."""
        path = tmp_path / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300)
        (own,) = [Path(p) for p in site.getsitepackages() if p.startswith(sys.prefix)]
        target = path / own.relative_to(sys.prefix)
        target.mkdir(parents=True, exist_ok=True)
        (target / "pip").symlink_to(own / "pip")
        return path

    return run, venv, cpu


def installed_torch(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


LINUX_X86_64, MACOS_ARM64 = ("Linux", "x86_64"), ("Darwin", "arm64")


def test_the_script_pins_the_projects_torch_and_the_images_cpu_index():
    text = SCRIPT.read_text()
    assert re.search(r"^TORCH_VERSION=(\S+)", text, flags=re.M)[1] == torch_pin() == "2.13.0"
    assert re.search(r"TORCH_CPU_INDEX:-(\S+?)\}", text)[1] == versions.TORCH_INDEX_URLS["cpu"]
    assert f"torch=={torch_pin()}\n" in (REPO / "images" / "requirements.txt").read_text()


def test_linux_x86_64_gets_the_cpu_build_and_the_gpu_build_only_on_request(world):
    run, make_venv, cpu = world
    venv = make_venv("venv")
    first = run(venv, LINUX_X86_64)
    assert first.returncode == 0, first.stderr
    assert installed_torch(venv) == "2.13.0+cpu"

    again = run(venv, LINUX_X86_64)  # idempotent: nothing to install
    assert again.returncode == 0 and again.stdout == "install-torch: torch 2.13.0+cpu is installed\n"

    # --gpu takes PyPI's build even with the CPU index exported, as the README once told users to.
    gpu = run(venv, LINUX_X86_64, "--gpu", PIP_EXTRA_INDEX_URL=cpu)
    assert gpu.returncode == 0, gpu.stderr
    assert installed_torch(venv) == "2.13.0"

    kept = run(venv, LINUX_X86_64)  # a later setup.sh (elastic-training up, test.sh) keeps the GPU build
    assert kept.stdout == "install-torch: torch 2.13.0 is installed\n" and installed_torch(venv) == "2.13.0"


def test_elsewhere_pypis_torch_is_installed(world):
    run, make_venv, _ = world
    venv = make_venv("venv-macos")
    result = run(venv, MACOS_ARM64)
    assert result.returncode == 0, result.stderr
    assert installed_torch(venv) == "2.13.0"


@pytest.mark.parametrize("script", ["setup.sh", "install-torch.sh"])
def test_an_unknown_option_is_refused_with_one_line(script, tmp_path):
    # From a copy: setup.sh works in its own checkout, so nothing it might do touches this one.
    (tmp_path / "scripts").mkdir()
    for name in ("setup.sh", "install-torch.sh"):
        (tmp_path / "scripts" / name).write_text((REPO / "scripts" / name).read_text())
    args = ["--cuda"] if script == "setup.sh" else [sys.executable, "--cuda"]
    result = subprocess.run(
        ["bash", str(tmp_path / "scripts" / script), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert not (tmp_path / ".venv").exists()
    assert result.returncode == 2
    name = script.removesuffix(".sh")
    expected = (
        f"{name}: unknown option --cuda; the options are --gpu (PyPI's CUDA build of torch on Linux x86-64) and "
        "--quiet (step lines and a line every 30 s only)"
        if script == "setup.sh"
        else f"{name}: unknown option --cuda; the only option is --gpu (PyPI's CUDA build of torch)"
    )
    assert result.stderr.splitlines() == [expected]


def test_setup_passes_gpu_to_the_torch_step_and_test_paths_take_the_default():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert re.search(r"--gpu\) torch_flags=\(--gpu\)", setup)
    assert re.search(
        r'bash scripts/install-torch\.sh \.venv/bin/python \$\{torch_flags\[@\]\+"\$\{torch_flags\[@\]\}"\}', setup
    )
    # The README's and CI's paths (.ci/run -> test.sh, the README's blocks) run setup.sh without --gpu.
    assert re.findall(r"bash scripts/setup\.sh(.*)", (REPO / "scripts" / "test.sh").read_text()) == [""]
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith("exec bash scripts/test.sh")
    readme_calls = re.findall(r"bash scripts/setup\.sh([^`\n]*)", (REPO / "README.md").read_text())
    assert readme_calls and {call.split("&&")[0].strip() for call in readme_calls} <= {"", "--gpu"}


class _CutsTheFirstDownload(http.server.BaseHTTPRequestHandler):
    """A PEP 503 index over HTTP whose wheel download breaks the way CI's did: the first GET sends
    half the wheel and drops the connection, and every resume (a Range request) gets its 206 header
    and no bytes. Later plain GETs get the whole wheel."""

    root: Path
    cuts_left = 1
    requests: list[str]

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.requests.append(f"{self.path} {self.headers.get('Range', '')}".strip())
        path = self.root / self.path.lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        wheel = path.suffix == ".whl"
        if wheel and self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream" if wheel else "text/html")
        self.end_headers()
        if wheel and type(self).cuts_left > 0:
            type(self).cuts_left -= 1
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_download_cut_mid_wheel_is_retried_by_a_new_pip(world, tmp_path):
    run, make_venv, _ = world
    root = tmp_path / "flaky"
    simple_index(root, torch_pin())
    handler = type("Handler", (_CutsTheFirstDownload,), {"root": root, "requests": [], "cuts_left": 1})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        venv = make_venv("venv-flaky")
        result = run(
            venv,
            MACOS_ARM64,
            PIP_INDEX_URL=f"http://127.0.0.1:{server.server_port}/simple",
            PIP_NO_CACHE_DIR="1",
            INSTALL_TORCH_RETRY_PAUSE_S="0",
        )
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert installed_torch(venv) == "2.13.0"
    assert "install-torch: pip failed (attempt 1 of 3); retrying in 0 s" in result.stderr
    downloads = [r for r in handler.requests if r.endswith(".whl") or ".whl " in r]
    assert downloads[0].endswith(".whl") and any("bytes=" in r for r in downloads[1:-1]), handler.requests
    assert downloads[-1].endswith(".whl")


def test_pip_failing_three_times_ends_with_one_line_and_exit_1(world, tmp_path):
    run, make_venv, _ = world
    venv = make_venv("venv-no-index")
    empty = tmp_path / "empty" / "simple"
    empty.mkdir(parents=True)
    result = run(venv, MACOS_ARM64, PIP_INDEX_URL=empty.as_uri(), INSTALL_TORCH_RETRY_PAUSE_S="0")
    assert result.returncode == 1
    assert result.stderr.count("install-torch: pip failed (attempt") == 2
    assert result.stderr.rstrip().splitlines()[-1] == "install-torch: pip failed 3 times; see its messages above"
