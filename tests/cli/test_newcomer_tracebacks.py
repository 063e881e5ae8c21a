"""A newcomer's mistakes that ended in a traceback (issue 39): each is now one line and a documented
exit status, met through the real command as a user meets it.

- An unreadable stack file: /proc/self/mem is a regular file whose read fails with EIO even for
  root (procfs: reading an unmapped address), so the test needs no unprivileged user.
- AWS_PROFILE, or the stack's `aws:profile`, naming a profile that is not configured: botocore
  raises ProfileNotFound when the session resolves it (botocore/session.py `_build_profile_map`).
- An AWS endpoint answering what is not an AWS response: a real HTTP server on 127.0.0.1, reached
  through AWS_ENDPOINT_URL as a user's proxy would be. An HTML page where botocore expects XML or
  JSON raises botocore.parsers.ResponseParserError, which is not a BotoCoreError.
- Ctrl-C: SIGINT to the command's process, as a terminal sends it.
"""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest

from synth_support import REPO


def command(
    *argv: str, cwd: Path = REPO, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd)}
    return subprocess.run(
        [sys.executable, "-m", "infra.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def clone(tmp_path):
    """A copy of the package and its stacks: a stack file can be broken there as in a user's clone."""
    import shutil

    shutil.copytree(REPO / "infra", tmp_path / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Pulumi.yaml", "stacks"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    return tmp_path


def run_in(
    clone: Path, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return command(*argv, cwd=cwd or clone, env={"PYTHONPATH": str(clone), "HOME": str(clone), **(env or {})})


# --- stack files -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["synth", "cost", "preflight"])
def test_an_unreadable_stack_file_is_one_line(clone, name):
    stack = clone / "stacks" / "Pulumi.broken.yaml"
    stack.symlink_to("/proc/self/mem")
    extra = ["--out", str(clone / "out")] if name == "synth" else []
    result = run_in(clone, name, "broken", *extra)
    assert result.returncode == 2
    assert one_line(result) == "error: cannot read stacks/Pulumi.broken.yaml: Input/output error"


def test_a_stack_file_that_is_not_utf8_is_one_line(clone):
    (clone / "stacks" / "Pulumi.latin.yaml").write_bytes("config:\n  aws:region: caf\xe9\n".encode("latin-1"))
    result = run_in(clone, "cost", "latin")
    assert result.returncode == 2
    assert one_line(result) == "error: Pulumi.latin.yaml is not UTF-8 text (line 2): save it as UTF-8"


def test_a_dangling_symlink_is_named_and_never_suggested(clone):
    (clone / "stacks" / "Pulumi.mine.yaml").symlink_to(clone / "elsewhere" / "Pulumi.mine.yaml")
    named = one_line(run_in(clone, "cost", "mine"))
    assert named == (
        f"error: stacks/Pulumi.mine.yaml is a symbolic link to {clone}/elsewhere/Pulumi.mine.yaml, "
        "which does not exist: point it at a stack file or remove it"
    )
    typo = one_line(run_in(clone, "cost", "mien"))
    assert "mine" not in typo and typo.endswith("stacks: dev gpu local smoke spot")


def test_a_stack_path_from_another_folder_is_read_from_the_project(clone, tmp_path):
    """`synth stacks/Pulumi.dev.yaml` from another folder once said to copy the file where it already was."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_in(clone, "cost", "stacks/Pulumi.smoke.yaml", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    outside = one_line(run_in(clone, "cost", "/tmp/Pulumi.dev.yaml", cwd=elsewhere))
    assert outside == (
        f"error: /tmp/Pulumi.dev.yaml is not in {clone}/stacks/, the project's stacks folder: Pulumi reads "
        f"a stack's config only from there (Pulumi.yaml's stackConfigDir; project folder {clone}); copy it "
        f"to {clone}/stacks/Pulumi.dev.yaml and name the stack dev"
    )
    missing = one_line(run_in(clone, "cost", "nosuch", cwd=elsewhere))
    assert f"no stack file {clone}/stacks/Pulumi.nosuch.yaml" in missing


# --- AWS profiles --------------------------------------------------------------------------------------


def test_aws_profile_naming_no_profile_is_one_line(tmp_path):
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = us-west-2\n", encoding="utf-8")
    result = command("preflight", "dev", cwd=tmp_path, env={"AWS_PROFILE": "nope", "AWS_CONFIG_FILE": str(config)})
    assert result.returncode == 2
    assert one_line(result) == (
        "error: AWS_PROFILE=nope names an AWS profile that is not in ~/.aws/config or "
        "~/.aws/credentials (profiles configured here: work; `aws configure --profile NAME` adds one)"
    )


def test_the_stacks_aws_profile_names_the_profile_preflight_uses(tmp_path, monkeypatch):
    """`pulumi up` signs with the provider's aws:profile; preflight checked boto3's default one instead."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = a\n"
        "[other]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = b\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    from infra.cli.preflight.checks import profile_clients

    sts = profile_clients("other")("sts", "us-east-1")
    assert sts._request_signer._credentials.access_key == "AKIAOTHER"
    assert profile_clients(None)("sts", "us-east-1")._request_signer._credentials.access_key == "AKIADEFAULT"


def test_a_stack_profile_that_does_not_exist_is_one_line(clone):
    stack = clone / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text(encoding="utf-8") + "  aws:profile: nope\n", encoding="utf-8")
    result = run_in(clone, "preflight", "dev", env={"AWS_CONFIG_FILE": str(clone / "none")})
    assert result.returncode == 2
    assert one_line(result).startswith("error: the stack's aws:profile 'nope' names an AWS profile that is not in")


# --- an endpoint that is not quite AWS -----------------------------------------------------------------

ANSWERS = {
    # A proxy's error page.
    "html-500": (500, "text/html", "<html><body><h1>500 Internal Server Error</h1>nginx</body></html>"),
    # A 200 that is not AWS's format at all: botocore's parsers raise ResponseParserError.
    "html-200": (200, "text/html", "<html><body>Please log in to the proxy</body></html>"),
    # Throttling, as the query services (STS, EC2) write it.
    "throttled": (
        400,
        "text/xml",
        "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
        "<Message>Rate exceeded</Message></Error></ErrorResponse>",
    ),
    # A service that does not implement the call.
    "not-implemented": (501, "text/plain", "Not Implemented"),
}


@pytest.fixture
def endpoint():
    answer: dict[str, tuple[int, str, str]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            status, kind, body = answer["now"]
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answer
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_preflight_against_an_endpoint_that_answers_garbage_checks_nothing_and_says_so(tmp_path, endpoint, kind):
    url, answer = endpoint
    answer["now"] = ANSWERS[kind]
    env = {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        # One attempt each: botocore's retries of a 500 would only make the test slower.
        "AWS_MAX_ATTEMPTS": "1",
    }
    result = command("preflight", "smoke", cwd=tmp_path, env=env)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert "could not check" in result.stdout
    # local-tools fails here (no pulumi on PATH); without it, nothing checked must still not read as a pass.
    assert result.returncode == 1 and "nothing failed" not in result.stdout


@pytest.mark.parametrize(
    "output, verdict", [([], "preflight: NOT CHECKED: "), (["--markdown"], "**preflight: NOT CHECKED: ")]
)
def test_preflight_that_could_check_nothing_is_not_a_pass(tmp_path, endpoint, output, verdict):
    """With every local tool present (stand-ins on PATH) and AWS answering garbage: exit 3, not 0, and the
    last line says so, in Markdown too (issue 39: --markdown had no verdict line)."""
    url, answer = endpoint
    answer["now"] = ANSWERS["html-200"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "pulumi": "echo v3.272.0",
        "aws": "echo aws-cli/2.30.0 Python/3.13",
        "docker": 'echo "Docker version 28.0.0"',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    env = {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_MAX_ATTEMPTS": "1",
        "PATH": f"{bin_dir}:/usr/bin:/bin",
    }
    result = command(
        "preflight",
        "smoke",
        "-c",
        "imageUri=123456789012.dkr.ecr.us-east-1.amazonaws.com/t@sha256:" + "a" * 64,
        *output,
        cwd=tmp_path,
        env=env,
    )
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 3, result.stdout
    assert last.startswith(verdict) and "that is not a pass" in last


# --- Ctrl-C ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delay", [1, 3, 6])
def test_ctrl_c_in_synth_is_one_line_and_writes_nothing(tmp_path, delay):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "infra.cli", "synth", "dev", "--out", str(tmp_path / "out")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(delay)  # in the imports (main()'s handler) or in the program (synth's own)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert "Traceback" not in err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out-")], "no staging folder is left"
    if process.returncode == 0:  # the signal came after the work (the interpreter's teardown): it is ignored there
        assert (tmp_path / "out" / "cost.json").is_file() and "synth: stack dev written to" in out
    else:
        assert process.returncode == 130, err
        assert err.strip().splitlines()[-1] in (
            "elastic-training synth: interrupted (Ctrl-C)",
            "elastic-training synth: interrupted (Ctrl-C); nothing written",
        )
        assert not (tmp_path / "out").exists()


# --- misleading output ------------------------------------------------------------------------------


def test_cost_names_sources_briefly_and_cites_them_in_full_with_sources():
    """Every synth, cost and preflight printed citations of up to 700 characters (issue 39)."""
    short = command("cost", "dev")
    assert short.returncode == 0, short.stderr
    sources = [line.strip() for line in short.stdout.splitlines() if line.strip().startswith("source: ")]
    assert sources and max(map(len, sources)) <= len("source: ") + 90
    assert short.stdout.splitlines()[-1] == "  the sources in full: elastic-training cost dev --sources"
    full = command("cost", "dev", "--sources")
    cited = [line.strip() for line in full.stdout.splitlines() if line.strip().startswith("source: ")]
    assert len(cited) == len(sources) and max(map(len, cited)) > 300
    assert all(
        whole.startswith(brief.removesuffix("...")) for whole, brief in zip(cited, sources) if "NOT READ" not in brief
    )


def test_run_minutes_below_zero_names_no_internal_function():
    result = command("compare", "dev", "smoke", "--run-minutes", "-5")
    assert result.returncode == 2
    assert one_line(result) == (
        "error: argument --run-minutes: must be a number of minutes above 0 and at most 100000, got -5 (see --help)"
    )


def test_status_without_a_kubeconfig_says_to_create_the_cluster_and_a_broken_one_names_its_line(tmp_path):
    missing = command("status", "dev", cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert missing.returncode == 1
    assert one_line(missing).startswith(
        "error: no kubeconfig ~/.kube/config: the cluster of stack dev is not created yet"
    )
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nclusters: [\n", encoding="utf-8")
    result = command("status", "dev", cwd=tmp_path, env={"KUBECONFIG": str(broken)})
    assert one_line(result).startswith(f"error: kubeconfig {broken} is not valid YAML: line 3, column 1: ")


# --- mistakes of our own (issue 39's closing list) -----------------------------------------------------


def test_synth_without_out_is_one_line():
    result = command("synth", "dev")
    assert result.returncode == 2
    assert one_line(result) == "error: the following arguments are required: --out (see --help)"


def test_a_quoted_tilde_in_out_is_the_home_folder_not_a_folder_named_tilde(tmp_path):
    result = command("synth", "smoke", "--out", "~/rendered", cwd=tmp_path, env={"HOME": str(tmp_path / "home")})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "home" / "rendered" / "cost.json").is_file() and not (tmp_path / "~").exists()


def test_a_file_that_is_yaml_but_not_a_kubeconfig_is_named(tmp_path):
    result = command(
        "status",
        "dev",
        "--kubeconfig",
        "/etc/hostname" if Path("/etc/hostname").is_file() else "/etc/passwd",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert one_line(result).endswith("is not a kubeconfig (a YAML mapping with clusters, contexts and users)")


def test_config_table_usage_errors_go_to_stderr():
    result = command("config-table", "extra")
    assert result.returncode == 2 and result.stdout == ""
    assert one_line(result).startswith("config-table: unrecognized arguments: extra")


def test_an_empty_stack_profile_is_no_profile(tmp_path):
    """`aws:profile: ""` once read as a profile named "" and was blamed on AWS_PROFILE."""
    env = {
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_MAX_ATTEMPTS": "1",
    }
    result = command("preflight", "smoke", "-c", "aws:profile=", cwd=tmp_path, env=env)
    assert "names an AWS profile" not in result.stderr and "Traceback" not in result.stderr
    assert "FAIL  credentials         no AWS credentials found" in result.stdout


def test_an_ascii_locale_and_warnings_as_errors_change_nothing(tmp_path):
    """LC_ALL=C once made synth fail writing graph.mmd ('·' is not ASCII), and a Latin-1 locale wrote it in
    Latin-1; the price tables were left open (ResourceWarning, an error under PYTHONWARNINGS=error)."""
    env = {
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONWARNINGS": "error::ResourceWarning",
        "PYTHONDEVMODE": "1",
    }
    result = command("synth", "dev", "--out", str(tmp_path / "out"), cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    # Our files are closed. (Pulumi's SDK leaves its own event loop open, pulumi/runtime/sync_await.py
    # new_event_loop without a close: "unclosed event loop", reported at exit, is not ours.)
    assert "unclosed file" not in result.stderr, result.stderr
    assert "·" in (tmp_path / "out" / "graph.mmd").read_bytes().decode("utf-8")
    for name in ("cost", "compare"):
        other = command(name, "dev", *(["spot"] if name == "compare" else []), cwd=tmp_path, env=env)
        assert other.returncode == 0 and "ResourceWarning" not in other.stderr, other.stderr
