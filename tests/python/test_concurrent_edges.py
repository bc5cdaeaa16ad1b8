# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule._joule.ConcurrentEdges: the C table (joule/torch/_native/
concurrent_edges.h) through which joule.torch's C++ DDP comm hook records the
all-reduce, called here through ctypes as that hook calls it: from several
threads, without the GIL, beside the session's nested edges."""
import ctypes
import os
import subprocess
import sys
import threading

import pytest

import joule


class _Table(ctypes.Structure):
    _edge = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t)
    _fields_ = [("version", ctypes.c_uint), ("edges", ctypes.c_void_p), ("begin", _edge), ("end", _edge)]


def table_of(concurrent_edges):
    """The table in the object's capsule (ctypes' CFUNCTYPE calls release the GIL)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _Table.from_address(get(concurrent_edges.capsule, b"joule._joule.concurrent_edges"))


def call(table, begin, region):
    error = ctypes.create_string_buffer(128)
    failed = (table.begin if begin else table.end)(table.edges, region.encode(), error, len(error))
    return failed, error.value.decode()


def test_a_python_clock_is_called_under_the_gil_and_its_errors_come_back_as_text():
    seen = []

    class Clock:
        def begin_concurrent(self, name):
            seen.append(("begin", name, threading.current_thread().name))

        def end_concurrent(self, name):
            raise ValueError(f"no open call of {name} (a test's)")

    edges = joule._joule.ConcurrentEdges(Clock())
    table = table_of(edges)
    assert table.version == 1
    worker = threading.Thread(target=lambda: seen.append(call(table, True, "allreduce")), name="comm")
    worker.start()
    worker.join()
    assert seen == [("begin", "allreduce", "comm"), (0, "")]
    failed, message = call(table, False, "allreduce")
    assert failed and "ValueError: no open call of allreduce (a test's)" in message, message
    # The message is cut to the caller's buffer, terminated.
    error = ctypes.create_string_buffer(8)
    assert table.end(table.edges, b"allreduce", error, len(error)) == 1 and error.value == b"ValueEr"


# In a fresh interpreter with the fake CUDA runtime and PyTorch's C shim
# loaded: a GpuEdgeClock whose edges run no Python, its concurrent edges
# from four threads without the GIL while the main thread records nested
# regions through the same clock.
_THREADS = r"""
import ctypes, os, sys, threading
sys.path.insert(0, os.environ["TEST_DIR"])
from test_concurrent_edges import call, table_of
import joule

fake = ctypes.CDLL(os.environ["JOULE_TEST_FAKE_CUDART"], mode=ctypes.RTLD_GLOBAL)
fake.fake_cudart_records.restype = ctypes.c_size_t
ctypes.CDLL(os.environ["JOULE_TEST_FAKE_TORCH_CUDA"])
events = joule.CudaRuntimeEvents()
assert events.stream_source == "torch"
recorder = joule.RegionRecorder(joule.Monitor(backend="sim", sim="count=1"))
clock = joule.GpuEdgeClock(recorder, events, drain_every=64)
edges = joule._joule.ConcurrentEdges(clock)
table = table_of(edges)
CALLS = 2000
failures = []

def communicate():
    for _ in range(CALLS):
        for begin in (True, False):
            failed, message = call(table, begin, "allreduce")
            if failed:
                failures.append(message)

records = fake.fake_cudart_records()
threads = [threading.Thread(target=communicate) for _ in range(4)]
for t in threads:
    t.start()
for _ in range(CALLS):
    clock.begin("backward")
    clock.end("backward")
for t in threads:
    t.join()
records = fake.fake_cudart_records() - records
clock.flush()  # the recorder checks each edge's order: an end before its begin would raise here
assert failures == [], failures[:3]
# Every begin met its end (an end closes the earliest open call of its region).
assert recorder.concurrent_regions == ["allreduce"] and recorder.open_concurrent_calls == 0
backward = [i for i in recorder.intervals(0.0, 1e12) if i[0] == "backward"]
print(records, len(backward))
"""


def test_a_gil_free_clock_takes_edges_from_threads_without_the_gil_beside_its_nested_ones(monkeypatch):
    if not (os.environ.get("JOULE_TEST_FAKE_CUDART") and os.environ.get("JOULE_TEST_FAKE_TORCH_CUDA")):
        pytest.skip("JOULE_TEST_FAKE_CUDART or JOULE_TEST_FAKE_TORCH_CUDA is not set (ctest sets them)")
    monkeypatch.setenv("TEST_DIR", os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setenv("JOULE_POWERCAP_ROOT", "/nonexistent")
    done = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # One event an edge: 4 threads x 2000 calls x 2, and the main thread's 2000 regions x 2.
    assert done.stdout.split() == ["20000", "2000"], done.stdout
