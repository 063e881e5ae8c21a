"""The training wait through the real Kubernetes client, against a real HTTPS server on 127.0.0.1.

The kubeconfig has the shape pulumi-eks generates (pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts
generateKubeconfig @ 7bf0c1b179932ce51cb02dfc4f9bd0d7550cb0cd): a cluster with `server` and
`certificate-authority-data`, and a user whose exec plugin is
`aws --region R eks get-token --cluster-name N --output json` with apiVersion
client.authentication.k8s.io/v1beta1 and env KUBERNETES_EXEC_INFO. Here `aws` is a small script first
on PATH that prints an ExecCredential as `aws eks get-token` does (aws/aws-cli
awscli/examples/eks/get-token.rst: kind, apiVersion, spec {}, status {expirationTimestamp, token
"k8s-aws-v1.…"}), with a new token on every call and an expiry a few seconds past the client's
5-minute refresh margin (kubernetes-client/python kubernetes/base/config/kube_config.py
EXPIRY_SKEW_PREVENTION_DELAY, v36.0.3 @ 67e7d9abfc6fe6629fa650d9b0abf4c99ef8c39c).

kubernetes==36.0.0 sends no Authorization header from such a kubeconfig (kube_config.py stores the
token under api_key['authorization'], configuration.py auth_settings() reads only 'BearerToken':
kubernetes-client/python issue #2582, fixed in 36.0.2 by PR #2607), so every call gets 401 and the
first test fails with it.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from infra.components.spec_identity import SPEC_HASH_ANNOTATION
from infra.components.completion import KubernetesCluster, wait_for

NAMESPACE, NAME, CLUSTER_NAME, REGION = "training", "train-run-1", "elastic-training-dev-eks", "us-west-2"
JOB_LABEL = "elastic-training/job"
UID = "5b0c7a52-8f1e-4c1a-9d1e-2f7e3c9a0b11"
EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"
# The client refreshes a token 5 minutes before its expiry; ours expire 3 s after that margin.
TOKEN_LIFETIME_SECONDS = 5 * 60 + 3
ELASTICJOB_PATH = f"/apis/elastic.pytorch.org/v1alpha1/namespaces/{NAMESPACE}/elasticjobs/{NAME}"

FAKE_AWS = '''#!{python}
"""Stands in for `aws eks get-token`: a new token per call, logged with its expiry."""
import datetime, json, os, sys
expected = {expected!r}
if sys.argv[1:] != expected:
    sys.exit("unexpected arguments: %r" % sys.argv[1:])
if json.loads(os.environ["KUBERNETES_EXEC_INFO"])["apiVersion"] != "{api_version}":
    sys.exit("unexpected KUBERNETES_EXEC_INFO")
log = {log!r}
number = len(open(log).read().splitlines()) + 1 if os.path.exists(log) else 1
token = "k8s-aws-v1.token-%d" % number
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={lifetime})
with open(log, "a") as out:
    out.write(json.dumps({{"token": token, "expiry": expiry.timestamp()}}) + "\\n")
print(json.dumps({{"kind": "ExecCredential", "apiVersion": "{api_version}", "spec": {{}},
                  "status": {{"expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"), "token": token}}}}))
'''


def _certificates(directory: Path) -> tuple[bytes, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 signed by it: (CA PEM, cert file, key file)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = directory / "server.crt", directory / "server.key"
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM), cert_file, key_file


def _status(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


# The hash of the spec the ElasticJob was made from, as the stack annotates it (infra/components/spec_identity.py).
SPEC_HASH = "5d2c0ffee0ddba11"


def _elasticjob(*conditions: tuple[str, str, str], last_failure: dict | None = None) -> dict:
    job = {
        "apiVersion": "elastic.pytorch.org/v1alpha1",
        "kind": "ElasticJob",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": UID,
            "resourceVersion": "4711",
            "creationTimestamp": "2026-11-22T03:00:00Z",
            "annotations": {SPEC_HASH_ANNOTATION: SPEC_HASH},
        },
        "spec": {
            "rdzvEndpoint": "rendezvous-store:29400",
            "minReplicas": 1,
            "maxReplicas": 2,
            "replicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "ExitCode", "template": {}}},
        },
        "status": {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": f"ElasticJob {NAME} is {t.lower()}.",
                    "lastUpdateTime": "2026-11-22T03:01:00Z",
                    "lastTransitionTime": "2026-11-22T03:01:00Z",
                }
                for t, s, r in conditions
            ],
            "replicaStatuses": {"Worker": {"active": 2}},
        },
    }
    if last_failure:
        job["status"]["lastFailure"] = last_failure
    return job


def _pod(index: int, phase: str, exit_code: int | None = None) -> dict:
    """A worker pod as the API server returns it (the fields the client's models require included)."""
    state = (
        {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": "2026-11-22T03:01:00Z",
                "finishedAt": "2026-11-22T03:20:00Z",
                "containerID": "containerd://0123",
            }
        }
        if exit_code is not None
        else {"running": {"startedAt": "2026-11-22T03:01:00Z"}}
    )
    name = f"{NAME}-worker-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"pod-{index}",
            "labels": {JOB_LABEL: NAME, "job-name": NAME, "replica-type": "worker", "replica-index": str(index)},
            "ownerReferences": [
                {
                    "apiVersion": "elastic.pytorch.org/v1alpha1",
                    "kind": "ElasticJob",
                    "name": NAME,
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "elasticjob-worker", "image": "trainer@sha256:00"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "elasticjob-worker",
                    "image": "trainer@sha256:00",
                    "imageID": "trainer@sha256:00",
                    "ready": exit_code is None,
                    "restartCount": 0,
                    "started": exit_code is None,
                    "state": state,
                }
            ],
        },
    }


def _event(reason: str, message: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{NAME}.1879a8f0c2d3e4f5", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": "job-uid",
            "resourceVersion": "4712",
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": 4,
        "source": {"component": "job-controller"},
        "firstTimestamp": "2026-11-22T03:00:05Z",
        "lastTimestamp": "2026-11-22T03:00:40Z",
    }


class FakeApiServer(ThreadingHTTPServer):
    """Serves one ElasticJob, its pods and events; 401 without a valid, unexpired bearer token.

    `elasticjob_answers` is a script of (HTTP status, body) for the ElasticJob GET; its last entry
    repeats. Every request is recorded as (method, path, query, token)."""

    def __init__(self, token_log: Path, elasticjob_answers: list, pods: list, events: list, logs: dict[str, str]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token_log, self.answers, self.pods, self.events = token_log, list(elasticjob_answers), pods, events
        self.logs = logs
        self.nodes: list | tuple = []  # GET /api/v1/nodes: the items, or (status, body) to refuse
        self.jobs: dict[str, dict] = {}  # batch/v1 Jobs by name (GET, PATCH)
        self.statefulsets: dict[
            str, dict
        ] = {}  # apps/v1 StatefulSets by name (GET): the rendezvous store's, for rendezvous_health
        self.patches: list[tuple[str, dict]] = []  # (Content-Type, body) of every PATCH
        self.requests: list[tuple[str, str, dict, str | None]] = []
        self.lock = threading.Lock()

    def valid_token(self, header: str | None) -> str | None:
        if not header or not header.startswith("Bearer "):
            return None
        token = header.removeprefix("Bearer ")
        issued = (
            [json.loads(line) for line in self.token_log.read_text().splitlines()] if self.token_log.exists() else []
        )
        return token if any(t["token"] == token and t["expiry"] > time.time() for t in issued) else None


class _Handler(BaseHTTPRequestHandler):
    server: FakeApiServer

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, code: int, body: dict | str) -> None:
        text = isinstance(body, str)
        data = body.encode() if text else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        token = self.server.valid_token(self.headers.get("Authorization"))
        with self.server.lock:
            self.server.requests.append((method, url.path, query, token))
            if token is None:
                return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            if method == "GET" and url.path == ELASTICJOB_PATH:
                code, body = self.server.answers.pop(0) if len(self.server.answers) > 1 else self.server.answers[0]
                return self._send(code, body)
            if method == "DELETE" and url.path == ELASTICJOB_PATH:
                return self._send(200, _status(200, "", "") | {"status": "Success"})
            pod_name = url.path.removeprefix(f"/api/v1/namespaces/{NAMESPACE}/pods/").removesuffix("/log")
            if method == "GET" and url.path.endswith("/log") and pod_name in self.server.logs:
                lines = self.server.logs[pod_name].splitlines(keepends=True)
                return self._send(200, "".join(lines[-int(query.get("tailLines", len(lines))) :]))
            if method == "GET" and url.path == f"/api/v1/namespaces/{NAMESPACE}/pods":
                key, _, value = query.get("labelSelector", "").partition("=")
                items = [p for p in self.server.pods if p["metadata"]["labels"].get(key) == value]
                return self._send(
                    200, {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": items}
                )
            job_name = url.path.removeprefix(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/")
            if job_name != url.path and method in ("GET", "PATCH"):
                if job_name not in self.server.jobs:
                    return self._send(404, _status(404, "NotFound", f'jobs.batch "{job_name}" not found'))
                job = self.server.jobs[job_name]
                if method == "PATCH":
                    patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    self.server.patches.append((self.headers["Content-Type"], patch))
                    job["spec"].update(patch.get("spec", {}))
                return self._send(200, job)
            statefulset = url.path.removeprefix(f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/")
            if method == "GET" and statefulset != url.path:
                if statefulset not in self.server.statefulsets:
                    return self._send(404, _status(404, "NotFound", f'statefulsets.apps "{statefulset}" not found'))
                return self._send(200, self.server.statefulsets[statefulset])
            if method == "GET" and url.path == "/api/v1/nodes":
                if isinstance(self.server.nodes, tuple):  # (status, body): a refusal such as 403
                    return self._send(*self.server.nodes)
                return self._send(
                    200,
                    {
                        "apiVersion": "v1",
                        "kind": "NodeList",
                        "metadata": {"resourceVersion": "1"},
                        "items": self.server.nodes,
                    },
                )
            if method == "GET" and url.path == f"/api/v1/namespaces/{NAMESPACE}/events":
                wanted = dict(part.split("=", 1) for part in query.get("fieldSelector", "").split(",") if part)
                items = [
                    e
                    for e in self.server.events
                    if all(e["involvedObject"].get(k.removeprefix("involvedObject.")) == v for k, v in wanted.items())
                ]
                return self._send(
                    200, {"apiVersion": "v1", "kind": "EventList", "metadata": {"resourceVersion": "1"}, "items": items}
                )
            return self._send(404, _status(404, "NotFound", f"{url.path} not found"))

    def do_GET(self):
        self._handle("GET")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_PATCH(self):
        self._handle("PATCH")


@pytest.fixture
def cluster_env(tmp_path, monkeypatch):
    """start(answers, pods, events, logs) -> (FakeApiServer, kubeconfig JSON); the fake `aws` is on PATH."""
    ca_pem, cert_file, key_file = _certificates(tmp_path)
    token_log = tmp_path / "tokens.jsonl"
    args = ["--region", REGION, "eks", "get-token", "--cluster-name", CLUSTER_NAME, "--output", "json"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(
        FAKE_AWS.format(
            python=sys.executable,
            expected=args,
            log=str(token_log),
            api_version=EXEC_API_VERSION,
            lifetime=TOKEN_LIFETIME_SECONDS,
        )
    )
    aws.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    servers = []

    def start(answers: list, pods: list, events: list, logs: dict[str, str] | None = None):
        server = FakeApiServer(token_log, answers, pods, events, logs or {})
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "aws",
            "clusters": [
                {
                    "name": "kubernetes",
                    "cluster": {
                        "server": f"https://127.0.0.1:{server.server_address[1]}",
                        "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    },
                }
            ],
            "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
            "users": [
                {
                    "name": "aws",
                    "user": {
                        "exec": {
                            "apiVersion": EXEC_API_VERSION,
                            "command": "aws",
                            "args": args,
                            "env": [
                                {"name": "KUBERNETES_EXEC_INFO", "value": json.dumps({"apiVersion": EXEC_API_VERSION})}
                            ],
                        }
                    },
                }
            ],
        }
        return server, json.dumps(kubeconfig)

    yield start, token_log
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_real_reader_authenticates_with_the_exec_plugin_and_refreshes_the_token(cluster_env):
    start, token_log = cluster_env
    running = (200, _elasticjob(("Running", "True", "ElasticJobRunning")))
    succeeded = (
        200,
        _elasticjob(("Running", "False", "ElasticJobRunning"), ("Succeeded", "True", "ElasticJobSucceeded")),
    )
    server, kubeconfig = start([running, succeeded], [_pod(0, "Running"), _pod(1, "Running")], [])

    cluster = KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL)
    # Real time: the first token is good for ~3 s in the client's eyes; the second poll comes after that.
    verdict = wait_for(cluster, timeout_seconds=3600, poll_seconds=TOKEN_LIFETIME_SECONDS - 5 * 60 + 1.5)

    assert verdict.state == "succeeded", verdict.message
    tokens = [token for _, _, _, token in server.requests]
    assert None not in tokens  # every request carried a valid bearer token
    paths = [path for _, path, _, _ in server.requests]
    # ... and the rendezvous store's StatefulSet (infra/components/rendezvous_health.py), which this server does not have
    assert (
        paths
        == [
            ELASTICJOB_PATH,
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            f"/api/v1/namespaces/{NAMESPACE}/events",
            f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/rendezvous-store",
        ]
        * 2
    )
    # The plugin ran at load and once more when the first token was about to expire; the server saw both.
    assert tokens == ["k8s-aws-v1.token-1"] * 4 + ["k8s-aws-v1.token-2"] * 4
    assert len(token_log.read_text().splitlines()) == 2
    assert server.requests[1][2]["labelSelector"] == f"{JOB_LABEL}={NAME}"


def test_a_refused_pod_after_an_api_outage_fails_the_wait_and_deletes_the_elasticjob(cluster_env):
    start, _ = cluster_env
    refused = (
        'Error creating: pods "train-run-1-worker-0" is forbidden: exceeded quota: compute-resources, '
        'requested: cpu=15, used: cpu=2, limited: cpu=16'
    )
    outage = [
        (503, _status(503, "ServiceUnavailable", "the server is currently unable to handle the request")),
        (429, _status(429, "TooManyRequests", "too many requests")),
        (503, _status(503, "ServiceUnavailable", "the server is currently unable to handle the request")),
    ]
    server, kubeconfig = start(
        [*outage, (200, _elasticjob())],
        [],
        [_event("SuccessfulCreate", "Created pod: train-run-1-1-abcde"), _event("FailedCreate", refused)],
    )
    now, sleeps = [0.0], []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    cluster = KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL)
    verdict = wait_for(cluster, timeout_seconds=3600, clock=lambda: now[0], sleep=sleep)

    assert verdict.state == "failed"
    assert verdict.message == (
        f"ElasticJob {NAMESPACE}/{NAME}: the Job cannot create worker pods: {refused}. "
        f"The ElasticJob {NAMESPACE}/{NAME} was deleted, so its pods stop "
        f"(run `pulumi up --refresh` to create it again)"
    )
    assert sleeps == [2, 4, 8]  # backoff over the 503/429 burst
    deletes = [(path, query) for method, path, query, token in server.requests if method == "DELETE" and token]
    assert deletes == [(ELASTICJOB_PATH, {"propagationPolicy": "Foreground"})]
    events_query = next(q for m, p, q, _ in server.requests if p.endswith("/events"))
    assert events_query["fieldSelector"] == f"involvedObject.kind=Job,involvedObject.name={NAME}"


def test_a_failed_worker_keeps_its_log_tail_and_the_elasticjob_is_deleted(cluster_env):
    start, _ = cluster_env
    # Our controller marks the run Failed with the Job's reason and names the last failed worker.
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
    log = "".join(f"[rank1] step {i} loss 2.{i:02d}\n" for i in range(30)) + "ValueError: bad batch\n"
    server, kubeconfig = start([failed], [_pod(0, "Running"), _pod(1, "Failed", 1)], [], {failed_pod: log})

    verdict = wait_for(KubernetesCluster(kubeconfig, NAMESPACE, NAME, JOB_LABEL), timeout_seconds=3600)

    first_line, *log_lines = verdict.message.split("\n")
    assert first_line == (
        f"ElasticJob {NAMESPACE}/{NAME} failed: FailedIndexes: ElasticJob {NAME} is failed.; last failure: "
        f"worker {failed_pod} (index 1) exited 1 (Error, counted against the retry limit). The ElasticJob "
        f"{NAMESPACE}/{NAME} was deleted, so its pods stop (run `pulumi up --refresh` to create it again)"
    )
    assert log_lines == [f"Last 20 lines of {failed_pod}'s log:", *log.splitlines()[-20:]]
    log_query = next(q for m, p, q, _ in server.requests if p.endswith("/log"))
    assert log_query == {"container": "elasticjob-worker", "tailLines": "20"}
    methods = [(m, p.rsplit("/", 1)[-1]) for m, p, _, _ in server.requests]
    assert methods[-2:] == [("GET", "log"), ("DELETE", NAME)]  # the log is read before the pod goes


def test_the_reader_takes_the_kubeconfig_file_and_context_the_provider_uses(cluster_env, tmp_path):
    """target existing: the wait gets the provider's `kubeconfig` (a file path, as pulumi-kubernetes'
    ProviderArgs.kubeconfig takes one) and `kubeContext`, and must reach the cluster of that context,
    not the file's current-context. The file is YAML, as kind and kubectl write it, with a token user
    (kind's own user authenticates with a client certificate, which this server does not model)."""
    start, token_log = cluster_env
    succeeded = (200, _elasticjob(("Succeeded", "True", "ElasticJobSucceeded")))
    right, right_json = start([succeeded], [_pod(0, "Succeeded", 0)], [])
    wrong, wrong_json = start([(404, _status(404, "NotFound", "elasticjobs not found"))], [], [])
    token = "kind-static-token"
    with token_log.open("a") as log:
        log.write(json.dumps({"token": token, "expiry": time.time() + 3600}) + "\n")
    clusters = {
        name: json.loads(text)["clusters"][0]["cluster"]
        for name, text in (("right", right_json), ("wrong", wrong_json))
    }
    lines = ["apiVersion: v1", "kind: Config", "current-context: kind-other", "clusters:"]
    for name, cluster in clusters.items():
        lines += [
            f"- name: {name}",
            "  cluster:",
            f"    server: {cluster['server']}",
            f"    certificate-authority-data: {cluster['certificate-authority-data']}",
        ]
    lines += [
        "contexts:",
        "- name: kind-other",
        "  context: {cluster: wrong, user: kind}",
        "- name: kind-elastic-training",
        "  context: {cluster: right, user: kind}",
        "users:",
        "- name: kind",
        f"  user: {{token: {token}}}",
    ]
    path = tmp_path / "kube" / "config"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")

    verdict = wait_for(
        KubernetesCluster(str(path), NAMESPACE, NAME, JOB_LABEL, context="kind-elastic-training"), timeout_seconds=3600
    )
    assert verdict.state == "succeeded", verdict.message
    assert [token for *_, token in right.requests] == [token] * 4 and wrong.requests == []

    # Without a context: the file's current-context, as kubectl would.
    wrong_verdict = wait_for(KubernetesCluster(str(path), NAMESPACE, NAME, JOB_LABEL), timeout_seconds=3600)
    assert wrong_verdict.state == "failed" and "does not exist" in wrong_verdict.message
    assert wrong.requests and len(right.requests) == 4


class Clock:
    """The wait's clock and sleep, for tests against this server: `at` runs a change on the server
    (a pod turning Ready, the rendezvous store coming back) once the wait's time has come."""

    def __init__(self):
        self.now, self.changes = 0.0, []

    def at(self, seconds: float, change) -> None:
        self.changes.append((seconds, change))

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        for due, change in [c for c in self.changes if c[0] <= self.now]:
            change()
            self.changes.remove((due, change))
