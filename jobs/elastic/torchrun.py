"""torchrun, with a rendezvous that outlasts an outage of its store.

    python -m jobs.elastic.torchrun TORCHRUN_ARGS...     (jobs.elastic.agent runs this as its child)

The same as `python -m torch.distributed.run TORCHRUN_ARGS...` (torchrun's own argument parser,
`parse_args`, and its `run`, wrapped in `record` as torchrun's `main` is), except:
- jobs.elastic.rendezvous's backend (BACKEND) is known to it whether or not the project is installed (its
  `torchrun.handlers` entry point needs the package's metadata). The ElasticJob's template carries
  `--rdzv_backend=BACKEND` after the `--rdzv_backend=etcd` the archived TorchElastic controller puts
  in front of our arguments (pytorch/elastic kubernetes/controllers/pod.go); argparse keeps the last.
  torch's own `etcd` and `etcd-v2` backends are refused with one line (exit 2): they need the etcd v2
  API, which no supported etcd serves, and our store is not etcd;
- a signal that stops it (SIGTERM from jobs.elastic.agent, which forwards the kubelet's) is one line and
  exit 128 + the signal, not torch's SignalException traceback: after stopping its workers torchrun
  re-raises it (agent/server/api.py `run`), and a stopped pod is not a crash;
- when that handler gives up on the store (unreachable past its bound), this process prints one
  line naming the store, leaves the same line as the container's termination message (the
  kubelet shows it in the pod's status, `state.terminated.message`), and exits
  EXIT_STORE_UNAVAILABLE, 138 (128 + SIGUSR1): kubeflow/common pkg/util/train/train_util.go
  `IsRetryableExitCode` reserves it for "user defined retryable error", so the controller
  deletes the pod and creates it again, and the new worker waits for the store and rejoins.
  No other outcome uses 138, so a 138 in the controller's ExitedWithCode events means "store".
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from torch.distributed import run as torch_run
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import record

from jobs import exit_codes, termination
from jobs.elastic import rendezvous, rendezvous_plugin

EXIT_STORE_UNAVAILABLE = exit_codes.STORE_UNAVAILABLE  # 138: retryable for the controller
RETIRED_BACKENDS = ("etcd", "etcd-v2")


def main(argv: Sequence[str] | None = None) -> int:
    args = torch_run.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.rdzv_backend in RETIRED_BACKENDS and not args.standalone:
        print(
            f"jobs.elastic.torchrun: error: --rdzv_backend={args.rdzv_backend}: torch's etcd rendezvous is retired here "
            f"(it needs the etcd v2 API); use --rdzv_backend={rendezvous.BACKEND} with the rendezvous store "
            "(python -m jobs.elastic.store_server) as --rdzv_endpoint",
            file=sys.stderr,
            flush=True,
        )
        return exit_codes.USAGE
    rendezvous_plugin.register()
    try:
        record(torch_run.run)(args)
    except rendezvous.StoreUnavailable as error:
        line = f"{error}; exiting {EXIT_STORE_UNAVAILABLE} so that the controller recreates this worker"
        print(f"jobs.elastic.torchrun: {line}", file=sys.stderr, flush=True)
        termination.write_termination_message(line)
        return EXIT_STORE_UNAVAILABLE
    except SignalException as stopped:
        # torch's handler is still installed: a second SIGTERM now would escape this line as a traceback.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        code = 128 + int(stopped.sigval)
        print(
            f"jobs.elastic.torchrun: stopped by {stopped.sigval.name}: the workers were stopped; exiting {code}",
            file=sys.stderr,
            flush=True,
        )
        return code
    except rendezvous.ArrivedAfterTheEnd as error:
        print(f"jobs.elastic.torchrun: {error}; exiting 0", file=sys.stderr, flush=True)
        return exit_codes.OK
    except (rendezvous.ClosedWithoutFinishing, rendezvous.RejoinedAfterTheEnd) as error:
        line = f"jobs.elastic.torchrun: {error}; exiting {exit_codes.CANNOT_CONTINUE}"
        print(line, file=sys.stderr, flush=True)
        termination.report_permanent(exit_codes.CANNOT_CONTINUE, line)
        return exit_codes.CANNOT_CONTINUE
    except rendezvous.SpareNotAdmitted as error:
        line = f"jobs.elastic.torchrun: {error}; exiting {exit_codes.CANNOT_CONTINUE}"
        print(line, file=sys.stderr, flush=True)
        termination.report_permanent(exit_codes.CANNOT_CONTINUE, line)
        return exit_codes.CANNOT_CONTINUE
    return 0


if __name__ == "__main__":
    sys.exit(main())
