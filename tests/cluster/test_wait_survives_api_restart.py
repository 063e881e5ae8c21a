"""Issue 29, test 4 (faults): the training wait survives an API server restart in the middle of a run.

The wait is the real one (infra/components/completion.py wait_for) reading through the real reader
(infra/components/kubernetes_reader.py KubernetesCluster, the official client) with the control
plane's kubeconfig file, as on target `existing`. The `local` stack's CRD, namespace and ElasticJob are
applied; while the wait polls, the API server process is killed (SIGKILL) and started again (etcd
keeps the state); then the test plays the controller's status part (no controller runs in this test,
which is about the wait) and marks the ElasticJob Succeeded. The wait must ride out the outage and
report success; a wait that gave up on the first refused connection would report failure instead.
"""

from __future__ import annotations

import json
import signal
import threading
import time

from kube import CRD, apply, delete, wait_established, wait_until
from infra.components.completion import KubernetesCluster, TransientApiError, wait_for
from elastic_training.elasticjob import JOB_LABEL


class CountingCluster(KubernetesCluster):
    """The real reader, counting its reads and the transient errors they met."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads, self.transient = 0, 0

    def read(self):
        self.reads += 1
        try:
            return super().read()
        except TransientApiError:
            self.transient += 1
            raise


def test_the_wait_rides_out_an_api_server_restart(rendered, control_plane):
    plane = control_plane
    manifests = rendered["local"].manifests
    crd = [m for m in manifests if m["kind"] == CRD]
    namespace = [m for m in manifests if m["kind"] == "Namespace" and m["metadata"]["name"] == "training"]
    elasticjob = next(m for m in manifests if m["kind"] == "ElasticJob")
    apply(plane, crd + namespace)
    wait_established(plane, [c["metadata"]["name"] for c in crd])
    apply(plane, [elasticjob])
    name, ns = elasticjob["metadata"]["name"], elasticjob["metadata"]["namespace"]
    try:
        cluster = CountingCluster(str(plane.kubeconfig), ns, name, JOB_LABEL)
        verdicts = []
        waiter = threading.Thread(
            target=lambda: verdicts.append(wait_for(cluster, timeout_seconds=300, poll_seconds=0.5))
        )
        waiter.start()
        wait_until("the wait's first reads", lambda: cluster.reads >= 2, timeout=30)

        # A crash, not a graceful stop: in-flight requests are cut, and nothing answers for 3 s.
        plane.restart_apiserver(down_seconds=3, how=signal.SIGKILL)
        assert waiter.is_alive(), f"the wait ended during the restart: {verdicts}"
        wait_until("a read after the restart", lambda: cluster.reads >= 4, timeout=60)

        # The controller's status part: the job succeeded.
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Succeeded",
                        "status": "True",
                        "reason": "ElasticJobSucceeded",
                        "message": "played by the test",
                        "lastUpdateTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ]
            }
        }
        # Through the status subresource, as a controller writes it: the CRD has one
        # (infra/manifests/elasticjob-crd.yaml), and a patch of the main resource drops status.
        plane.kubectl(
            "patch", "elasticjob", name, "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )
        waiter.join(timeout=60)
        assert not waiter.is_alive(), "the wait did not end after the job succeeded"
        assert cluster.transient >= 1, "the restart never reached the wait: the test proves nothing"
        assert verdicts[0].state == "succeeded", verdicts[0].message
    finally:
        delete(plane, [*crd, *namespace, elasticjob])
