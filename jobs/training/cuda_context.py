"""The GPU's CUDA context, made by the driver in a thread while the worker is still importing torch.

Making the context is the slowest part of a worker's start after the imports: on one H200 (issue
40, docs/gpu.md) CUDA's initialisation and torch._dynamo's import took 4 to 6 s together, and
torch's import 3.4 s, one after the other. The context a process's first CUDA call makes is the
device's *primary* context, which the CUDA runtime (and so torch) shares with anyone who retains it
through the driver API. So this module asks the driver (libcuda, through ctypes: no torch needed) to
initialise and retain that context in a background thread started before torch is imported; the
driver's calls release the GIL, so the import goes on meanwhile, and torch's own initialisation
then finds the context made.

Driver API calls used, from NVIDIA's CUDA Driver API reference (cuda.h): cuInit(0),
cuDeviceGetCount(int*), cuDeviceGet(CUdevice*, int ordinal), cuDevicePrimaryCtxRetain(CUcontext*,
CUdevice); each returns CUDA_SUCCESS (0) or an error code. The ordinal is the one torch uses:
LOCAL_RANK modulo the visible devices (jobs.training.runtime.device_for); the driver and the runtime
number the devices alike, CUDA_VISIBLE_DEVICES included. The context is retained for the life of the
process, as torch keeps it.

Nothing here is needed: without libcuda (a CPU machine) or on any error the thread ends and torch
makes the context itself, as before. `result()` says what happened, for the worker's start-up line.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

_LIBCUDA = "libcuda.so.1"  # the driver's soname on Linux, installed with the driver (not with torch)


class EarlyContext:
    def __init__(self) -> None:
        self.seconds: float | None = None
        self.outcome = "not started"
        self._thread = threading.Thread(target=self._run, name="cuda-context", daemon=True)

    def start(self) -> EarlyContext:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self.outcome = _retain_primary_context(int(os.environ.get("LOCAL_RANK", "0")))
        except (OSError, AttributeError, ValueError) as error:  # no driver library, or not this API
            self.outcome = f"not made early ({error})"
        self.seconds = time.perf_counter() - started

    def result(self) -> str:
        """How the early context went, once the thread is done (waits for it)."""
        self._thread.join()
        return f"{self.outcome} in {self.seconds:.2f} s" if self.seconds is not None else self.outcome


def _retain_primary_context(local_rank: int) -> str:
    driver = ctypes.CDLL(_LIBCUDA)

    def check(call: str, code: int) -> None:
        if code != 0:
            raise ValueError(f"{call} returned CUDA error {code}")

    check("cuInit", driver.cuInit(0))
    count = ctypes.c_int()
    check("cuDeviceGetCount", driver.cuDeviceGetCount(ctypes.byref(count)))
    if count.value == 0:
        return "no CUDA device"
    ordinal = local_rank % count.value
    device = ctypes.c_int()
    check("cuDeviceGet", driver.cuDeviceGet(ctypes.byref(device), ordinal))
    context = ctypes.c_void_p()
    check("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
    return f"CUDA context of device {ordinal} made while torch was imported"


def start_in_background() -> EarlyContext:
    return EarlyContext().start()
