"""The training wait as properties: the deadline at exactly its value and measured from the wait's
start on any clock, every field of a verdict line, the event rule that must match all of reason,
kind, name and time, and the Pulumi provider's create/diff contract. Shapes as in test_completion.py
(which cites the controller's source)."""

from __future__ import annotations

import base64
import json

import dill
import pulumi
import pytest
from pulumi.runtime import rpc
import urllib3
from kubernetes.client.exceptions import ApiException
from pulumi.dynamic import CreateResult
from test_completion import FAILED, HOUR, LAST_FAILURE, RUNNING, FakeClock, FakeCluster, elasticjob, event, pod, snap

from infra.components import completion, kubernetes_reader
from infra.cli.mocks import RecordingMocks
from infra.components.completion import (
    ApiError,
    KubernetesCluster,
    Snapshot,
    TransientApiError,
    Verdict,
    assess,
    wait_for,
)

REF = "training/train-run-1"


def test_the_deadline_is_exactly_the_timeout_and_is_measured_from_the_start_on_any_clock():
    job = snap(elasticjob(RUNNING), [pod(0, "Running"), pod(1, "Pending")])
    assert assess(job, HOUR, HOUR).state == "running"
    late = assess(job, HOUR + 0.001, HOUR)
    assert late == Verdict(
        "failed",
        f"deadline exceeded: ElasticJob {REF} did not succeed within 60 minutes "
        "(train-run-1-worker-0=Running, train-run-1-worker-1=Pending)",
    )
    # time.monotonic() starts anywhere: a clock far from zero must not bring the deadline forward.
    clock = FakeClock()
    clock.now = 10 * HOUR
    cluster = FakeCluster(job, snap(elasticjob(("Succeeded", "True", "Done", "ok"))))
    assert wait_for(cluster, HOUR, 15, clock, clock.sleep).state == "succeeded"


def test_the_deadline_line_names_pods_without_a_phase_and_says_when_there_are_none():
    no_phase = {"metadata": {"name": "train-run-1-worker-0"}}
    assert assess(snap(elasticjob(), [no_phase]), 2, 1).message.endswith("(train-run-1-worker-0=?)")
    assert assess(snap(elasticjob()), 2, 1).message.endswith("(no worker pods)")


@pytest.mark.parametrize(
    "reason, message, detail",
    [
        ("BackoffLimit", "too many", "BackoffLimit: too many"),
        ("XLimit", "over MAX", "XLimit: over MAX"),
        ("", "only a message", "only a message"),
        ("OnlyReason", "", "OnlyReason"),
    ],
)
def test_a_failed_condition_quotes_what_it_has(reason, message, detail):
    condition = {"type": "Failed", "status": "True"}
    condition.update({k: v for k, v in (("reason", reason), ("message", message)) if v})
    job = elasticjob()
    job["status"]["conditions"] = [condition]
    assert assess(snap(job), 0, HOUR) == Verdict("failed", f"ElasticJob {REF} failed: {detail}")


def test_a_job_without_a_namespace_is_named_alone():
    job = elasticjob(("Succeeded", "True", "Done", "ok"))
    del job["metadata"]["namespace"]
    assert assess(snap(job), 0, HOUR).message == "ElasticJob train-run-1 succeeded"


def test_a_last_failure_without_reason_or_action_reads_error_and_counted():
    bare = {"pod": "train-run-1-0-abcde", "index": 0, "exitCode": 137}
    verdict = assess(snap(elasticjob(FAILED, last_failure=bare)), 0, HOUR)
    assert verdict == Verdict(
        "failed",
        f"ElasticJob {REF} failed: FailedIndexes: Job has failed indexes; last failure: "
        "worker train-run-1-0-abcde (index 0) exited 137 (Error, counted)",
        "train-run-1-0-abcde",
    )
    # no pod named: no last-failure clause and no log to read
    assert assess(snap(elasticjob(FAILED, last_failure={"exitCode": 1})), 0, HOUR) == Verdict(
        "failed", f"ElasticJob {REF} failed: FailedIndexes: Job has failed indexes"
    )


# --- FailedCreate: reason, kind, name and time must match, the latest one wins ----------------------


def refused(*events) -> Verdict:
    return assess(snap(elasticjob(RUNNING), [], list(events)), 0, HOUR)


def test_only_a_failed_create_event_of_this_elasticjobs_job_counts():
    mine = event("FailedCreate", "Error creating: quota")
    assert refused(mine).message == f"ElasticJob {REF}: the Job cannot create worker pods: Error creating: quota"
    for field, value in (("kind", "ElasticJob"), ("name", "train-run-2")):
        other = event("FailedCreate", "x")
        other["involvedObject"][field] = value
        assert refused(other).state == "running", field
    assert refused(event("FailedScheduling", "x")).state == "running"
    assert refused(event("FailedCreate", "x", last="2026-11-22T02:49:59Z")).state == "running"  # before it was created
    assert refused(event("FailedCreate", "x", last="2026-11-22T02:50:00Z")).state == "failed"
    no_object = event("FailedCreate", "x")
    del no_object["involvedObject"]
    assert refused(no_object).state == "running"


def test_the_latest_event_wins_by_last_timestamp_or_else_event_time():
    old = event("FailedCreate", "old", last="2026-11-22T03:00:00Z")
    new = event("FailedCreate", "new", last="2026-11-22T03:05:00Z")
    assert refused(new, old).message.endswith(": new") and refused(old, new).message.endswith(": new")
    # events.k8s.io-style events carry eventTime and no lastTimestamp
    series_old, series_new = (
        dict(old, lastTimestamp=None, eventTime="2026-11-22T04:00:00.000000Z"),
        dict(new, lastTimestamp=None, eventTime="2026-11-22T04:10:00.000000Z"),
    )
    assert refused(series_new, series_old).message.endswith(": new") and refused(
        series_old, series_new
    ).message.endswith(": new")
    # an event with neither time cannot be told from a predecessor's: it does not count
    undated = dict(old, lastTimestamp=None, message="undated")
    assert refused(undated).state == "running" and refused(new, undated).message.endswith(": new")


def test_an_event_without_a_message_still_fails_with_its_reason():
    assert refused(dict(event("FailedCreate", ""), message=None)).message.endswith(
        "cannot create worker pods: FailedCreate"
    )


# --- what the wait says when it stops --------------------------------------------------------------


def test_a_failed_deletion_keeps_the_verdict_failed_and_the_failed_pod():
    clock = FakeClock()
    failed = snap(elasticjob(FAILED, last_failure=LAST_FAILURE))
    cluster = FakeCluster(failed, delete_errors=[ApiError("HTTP 403 Forbidden", 403)])
    verdict = wait_for(cluster, HOUR, 15, clock, clock.sleep)
    assert verdict.state == "failed" and verdict.failed_pod == LAST_FAILURE["pod"]
    assert "Deleting the ElasticJob failed too (HTTP 403 Forbidden)" in verdict.message
    cluster = FakeCluster(failed)
    verdict = wait_for(cluster, HOUR, 15, clock, clock.sleep)
    assert verdict.state == "failed" and verdict.failed_pod == LAST_FAILURE["pod"] and cluster.deletions == 1


@pytest.mark.parametrize(
    "log, kept",
    [
        ("loss 1.5  MAX  \n\n", "loss 1.5  MAX  "),
        ("step 9 of MAX\n", "step 9 of MAX"),
        ("no newline X", "no newline X"),
    ],
)
def test_the_log_tail_keeps_trailing_spaces_and_drops_only_the_last_newlines(log, kept):
    class Spacey(FakeCluster):
        def worker_log_tail(self, pod, lines):
            return log

    clock = FakeClock()
    verdict = wait_for(Spacey(snap(elasticjob(FAILED, last_failure=LAST_FAILURE))), HOUR, 15, clock, clock.sleep)
    assert verdict.message.endswith(f"Last 20 lines of {LAST_FAILURE['pod']}'s log:\n{kept}")


def test_a_refused_read_retries_its_deletion_through_transient_errors():
    clock = FakeClock()
    cluster = FakeCluster(ApiError("HTTP 403 Forbidden", 403), delete_errors=[TransientApiError("HTTP 503")])
    verdict = wait_for(cluster, HOUR, 15, clock, clock.sleep)
    assert cluster.deletions == 2 and clock.sleeps == [completion.FIRST_BACKOFF_SECONDS]
    assert verdict.message.startswith(
        f"the Kubernetes API refused to show ElasticJob {REF} (HTTP 403 Forbidden). The ElasticJob"
    )


def test_a_verdicts_deletion_retries_through_transient_errors():
    clock = FakeClock()
    cluster = FakeCluster(
        snap(elasticjob(FAILED, last_failure=LAST_FAILURE)), delete_errors=[TransientApiError("HTTP 503")]
    )
    verdict = wait_for(cluster, HOUR, 15, clock, clock.sleep)
    assert cluster.deletions == 2 and clock.sleeps == [completion.FIRST_BACKOFF_SECONDS]
    assert f"The ElasticJob {REF} was deleted" in verdict.message


# --- the client's errors ---------------------------------------------------------------------------


def test_arguments_reach_the_client_method_unchanged():
    assert KubernetesCluster._call(lambda *a, **k: (a, k), 1, "two", three=3) == ((1, "two"), {"three": 3})


def test_an_error_without_a_status_is_final_and_one_with_a_plain_body_says_only_the_status():
    error = ApiException(status=None, reason="weird")
    with pytest.raises(ApiError):
        KubernetesCluster._call(lambda: (_ for _ in ()).throw(error))
    error = ApiException(status=503, reason="Unavailable")
    error.body = b"<html>gateway</html>"
    with pytest.raises(TransientApiError) as raised:
        KubernetesCluster._call(lambda: (_ for _ in ()).throw(error))
    assert str(raised.value) == "HTTP 503 Unavailable"


def test_a_connection_error_names_its_type():
    failure = urllib3.exceptions.ProtocolError("Connection aborted.")
    with pytest.raises(TransientApiError) as raised:
        KubernetesCluster._call(lambda: (_ for _ in ()).throw(failure))
    assert str(raised.value) == "ProtocolError: Connection aborted."


# --- the Pulumi provider ---------------------------------------------------------------------------

PROPS = {
    "kubeconfig": "{}",
    "context": "kind-elastic",
    "namespace": "training",
    "name": "train-run-1",
    "jobLabel": "elastic-training/job",
    "timeoutSeconds": 7200,
    "specHash": "--rdzv_id=run-1-abc",
    "result": None,
    "region": "us-west-2",
    "maxRunCostUsd": 5.0,
    "runCost": None,
}


def test_create_waits_on_the_named_elasticjob_and_fails_with_the_verdicts_message(monkeypatch):
    built, waits = [], []
    monkeypatch.setattr(completion, "KubernetesCluster", lambda *args: built.append(args) or "cluster")
    verdicts = iter([Verdict("succeeded", f"ElasticJob {REF} succeeded"), Verdict("failed", "worker x failed")])
    monkeypatch.setattr(
        completion,
        "wait_for",
        lambda cluster, timeout, spec_hash, guard: waits.append((cluster, timeout, spec_hash, guard)) or next(verdicts),
    )
    # The run's cost is measured on the same cluster with the budget the guard kept (tests/components/test_run_cost.py).
    monkeypatch.setattr(
        completion.run_cost, "final", lambda cluster, budget: {"on": cluster, "ceiling": budget.ceiling}
    )
    provider = completion._CompletionProvider()
    result = provider.create(dict(PROPS))
    assert isinstance(result, CreateResult) and result.id == REF
    assert result.outs == {
        **PROPS,
        "result": f"ElasticJob {REF} succeeded",
        "runCost": {"on": "cluster", "ceiling": 5.0},
    }
    assert built == [("{}", "training", "train-run-1", "elastic-training/job", "kind-elastic")]
    assert [w[:3] for w in waits] == [("cluster", 7200.0, PROPS["specHash"])] and type(waits[0][1]) is float
    assert callable(waits[0][3])
    with pytest.raises(RuntimeError, match="^worker x failed$"):
        provider.create(dict(PROPS))
    assert provider.delete(REF, PROPS) is None


@pytest.mark.parametrize("key", ["namespace", "name", "timeoutSeconds", "specHash"])
def test_each_waited_on_setting_replaces_the_wait_and_nothing_else_does(key):
    provider = completion._CompletionProvider()
    diff = provider.diff(REF, PROPS, {**PROPS, key: "changed"})
    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (True, [key], True)
    same = provider.diff(REF, PROPS, {**PROPS, "kubeconfig": '{"token": "new"}', "result": "x"})
    assert (same.changes, same.replaces) == (False, [])
    both = provider.diff(REF, PROPS, {**PROPS, "name": "n", "specHash": "s"})
    assert both.replaces == ["name", "specHash"]


def test_snapshot_lists_default_to_empty_and_are_not_shared():
    a, b = Snapshot({}), Snapshot({})
    assert a.pods == [] and a.events == [] and a.pods is not b.pods


def _register_completion(**arguments):
    """Construct the resource under the recording mocks; returns it and its one registration."""
    mocks = RecordingMocks("elastic-training", "dev", "us-west-2")
    mocks.install()
    resource = completion.ElasticJobCompletion(
        "training-complete",
        kubeconfig="{}",
        namespace="training",
        elasticjob_name="train-run-1",
        job_label="elastic-training/job",
        timeout_seconds=7200,
        spec_hash="--rdzv_id=run-1-abc",
        region="us-west-2",
        max_run_cost_usd=5.0,
        **arguments,
    )

    def registration(_urn):
        (found,) = [r for r in mocks.registrations if r.name == "training-complete"]
        return found

    return resource, resource.urn.apply(registration)


@pulumi.runtime.test
def test_the_resource_carries_what_the_provider_reads_and_keeps_the_kubeconfig_secret():
    resource, registered = _register_completion(context="kind-elastic")

    def check(args):
        assert {k: v for k, v in args.inputs.items() if k in PROPS} == {k: v for k, v in PROPS.items() if v is not None}
        # What the engine's dynamic provider host runs (pulumi/dynamic/__main__.py get_provider:
        # dill.loads of the base64 text in "__provider"; dynamic.py sends that text as a secret).
        provider = args.inputs["__provider"]
        assert provider[rpc._special_sig_key] == rpc._special_secret_sig
        assert isinstance(dill.loads(base64.b64decode(provider["value"])), completion._CompletionProvider)
        # pulumi-eks's kubeconfig carries the cluster's CA and endpoint: never stored in plain text.
        assert args.secret_outputs == ["kubeconfig"]
        # `result` is an output of the resource (the program exports it as trainingResult).
        assert isinstance(resource.result, pulumi.Output)

    return registered.apply(check)


@pulumi.runtime.test
def test_without_a_context_the_resource_asks_for_the_kubeconfigs_current_one():
    _, registered = _register_completion()
    return registered.apply(lambda args: _assert_equal(args.inputs["context"], ""))


@pulumi.runtime.test
def test_the_callers_options_are_kept_beside_the_secret_output():
    mocks = RecordingMocks("elastic-training", "dev", "us-west-2")
    mocks.install()
    parent = pulumi.ComponentResource("test:index:Parent", "parent")
    resource = completion.ElasticJobCompletion(
        "child-complete",
        kubeconfig="{}",
        namespace="training",
        elasticjob_name="train-run-1",
        job_label="elastic-training/job",
        timeout_seconds=60,
        spec_hash="h",
        opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=["result"]),
    )

    def check(_urn):
        (args,) = [r for r in mocks.registrations if r.name == "child-complete"]
        assert args.parent.endswith("test:index:Parent::parent")
        assert sorted(args.secret_outputs) == ["kubeconfig", "result"]

    return resource.urn.apply(check)


def _assert_equal(actual, expected):
    assert actual == expected


def test_create_without_a_context_uses_the_current_one(monkeypatch):
    built = []
    monkeypatch.setattr(completion, "KubernetesCluster", lambda *args: built.append(args) or "cluster")
    monkeypatch.setattr(completion, "wait_for", lambda cluster, timeout, spec_hash, guard: Verdict("succeeded", "ok"))
    monkeypatch.setattr(completion.run_cost, "final", lambda cluster, budget: {})
    for props in (
        {k: v for k, v in PROPS.items() if k != "context"},
        {**PROPS, "context": ""},
        {**PROPS, "context": None},
    ):
        completion._CompletionProvider().create(props)
    assert [args[-1] for args in built] == ["", "", ""]


# --- the real client's calls, with the client replaced by one that answers as the API server does --


class _Answer:
    def __init__(self, data: bytes):
        self.data = data


def bare_cluster(custom=None, core=None) -> KubernetesCluster:
    cluster = object.__new__(KubernetesCluster)  # no kubeconfig: the client objects are set below
    cluster.namespace, cluster.name, cluster._job_label = "training", "train-run-1", "elastic-training/job"
    cluster._custom, cluster._core = custom, core
    return cluster


def _api_error(status):
    error = ApiException(status=status, reason="x")
    error.body = None
    return error


def test_deleting_an_elasticjob_that_is_already_gone_succeeds_and_any_other_refusal_is_raised():
    class Custom:
        def __init__(self, status):
            self.status, self.calls = status, []

        def delete_namespaced_custom_object(self, *args, **kwargs):
            self.calls.append((args, kwargs))
            raise _api_error(self.status)

    gone = Custom(404)
    assert bare_cluster(custom=gone).delete_elasticjob() is None
    assert gone.calls == [
        (
            ("elastic.pytorch.org", "v1alpha1", "training", "elasticjobs", "train-run-1"),
            {"propagation_policy": "Foreground"},
        )
    ]
    for status in (403, 405, 409):
        with pytest.raises(ApiError) as raised:
            bare_cluster(custom=Custom(status)).delete_elasticjob()
        assert raised.value.status == status


def test_a_log_that_is_not_utf_8_is_read_with_replacement_characters():
    class Core:
        def read_namespaced_pod_log(self, *args, **kwargs):
            self.asked = (args, kwargs)
            return _Answer("epoch 1 ✓\n".encode() + b"\xff\xfe torn\n")

    core = Core()
    assert bare_cluster(core=core).worker_log_tail("train-run-1-worker-0", 20) == "epoch 1 ✓\n\ufffd\ufffd torn\n"
    assert core.asked == (
        ("train-run-1-worker-0", "training"),
        {"container": "elasticjob-worker", "tail_lines": 20, "_preload_content": False},
    )


def test_the_run_cost_reads_the_named_nodes_as_api_dicts():
    """list_node through the real client's models and serializer (kubernetes==36.0.3): camelCase dicts."""
    from kubernetes import client

    class Core:
        def list_node(self):
            return client.V1NodeList(
                items=[
                    client.V1Node(
                        metadata=client.V1ObjectMeta(
                            name=name, labels={"node.kubernetes.io/instance-type": "c5.4xlarge"}
                        )
                    )
                    for name in ("ip-a", "ip-b")
                ]
            )

    cluster = bare_cluster(core=Core())
    cluster._api_client = client.ApiClient()
    assert cluster.read_nodes({"ip-b"}) == {
        "ip-b": {"metadata": {"name": "ip-b", "labels": {"node.kubernetes.io/instance-type": "c5.4xlarge"}}}
    }


# --- which cluster the wait talks to -----------------------------------------------------------------


def _two_cluster_kubeconfig() -> dict:
    """Two contexts on two API servers; `first` is the current one (kubeconfig v1 shape)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "first",
        "clusters": [
            {"name": name, "cluster": {"server": f"https://{name}.example:6443"}} for name in ("first", "second")
        ],
        "users": [{"name": name, "user": {"token": f"token-{name}"}} for name in ("first", "second")],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}} for name in ("first", "second")],
    }


@pytest.mark.parametrize(
    "context, server",
    [
        ("", "https://first.example:6443"),
        ("first", "https://first.example:6443"),
        ("second", "https://second.example:6443"),
    ],
)
def test_the_wait_talks_to_the_named_context_or_the_current_one(tmp_path, context, server):
    """The real kubernetes client (kubernetes==36.0.3 config/kube_config.py), from the JSON document
    pulumi-eks hands over and from a file path as on target existing."""
    document = json.dumps(_two_cluster_kubeconfig())
    path = tmp_path / "kubeconfig"
    path.write_text(document)
    for kubeconfig in (document, str(path)):
        client = kubernetes_reader._api_client(kubeconfig, context)
        assert client.configuration.host == server
        assert client.configuration.api_key["BearerToken"] == f"Bearer token-{server[8:].split('.')[0]}"
