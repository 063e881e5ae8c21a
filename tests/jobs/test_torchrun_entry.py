"""jobs.torchrun's own pieces; its runs are in test_store_outage.py (138 past the bound),
test_rendered_elasticjob.py (the controller's --rdzv_backend=etcd runs jobs.rendezvous) and
test_eviction.py (--standalone, usage errors, SIGTERM)."""

from __future__ import annotations

import signal

from jobs import torchrun


def test_exit_138_is_the_controller_s_user_defined_retryable_code():
    # kubeflow/common @ 0b3a4c3 pkg/util/train/train_util.go IsRetryableExitCode: "We decide to
    # take the exit code of SIGUSR1(138 = 128 + 10) for user defined retryable error."
    assert torchrun.EXIT_STORE_UNAVAILABLE == 128 + signal.SIGUSR1 == 138


def test_the_termination_message_goes_where_the_kubelet_mounted_a_file_and_nowhere_else(tmp_path):
    mounted = tmp_path / "termination-log"
    mounted.write_text("")  # the kubelet creates the file the container's terminationMessagePath names
    assert torchrun.write_termination_message("the rendezvous store etcd-service:2379 (etcd) ...", mounted)
    assert mounted.read_text() == "the rendezvous store etcd-service:2379 (etcd) ..."
    assert torchrun.write_termination_message("x" * 5000, mounted) and len(mounted.read_text()) == 4096
    missing = tmp_path / "not-in-a-pod"
    assert not torchrun.write_termination_message("laptop", missing) and not missing.exists()
