"""One BLAS thread while spaCy runs, from whichever thread runs it.

spaCy's matrices are small (a query, a batch of sentences): one OpenBLAS thread is fastest. With two, the
second one wakes for every product and then spins on the other core waiting for the next: on a 2-core machine
a query's NER ran 5-25x slower beside other work, and a query served from a worker thread cost ~30 CPU ms
instead of ~13 (record `docs/experiments/2026-11-26-blas-threads.md`).

OpenBLAS's pool size is process-wide. threadpoolctl lets one thread at a time change it, its "controlling
thread" (the first to set a limit, until a ``with threadpool_limits(...)`` block of that thread ends), and
silently ignores every other thread (``threadpoolctl.OpenBLASController``). A service answers on worker
threads, and a limit set by one query could never be lifted by another. So the limit here is counted across
threads: the first caller in sets it and the last one out restores the original, each under one lock, after
taking threadpoolctl's control from whichever thread held it, and giving it up again right after.

A process whose parallelism lies elsewhere pins OpenBLAS to one thread for good (``one_blas_thread_for_process``):
the extraction workers (one process per core) and the service (threads answering queries side by side). In the
service, graph_rag's small products outside NER (near-duplicate similarities, norms) still ran on two threads,
and with 16 clients on 2 cores it served 62-74 queries a second against 89-93 pinned (record
``docs/experiments/2026-11-27-service-blas-pin.md``). The counted guard leaves a pinned count alone.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

_lock = threading.Lock()  # guards the four below; never held while the caller's work runs
_controller: Any = None  # threadpoolctl's ThreadpoolController, made on first use (it scans the loaded libraries)
_limit: Any = None  # the one-thread limit in force while _users > 0
_users = 0
_pinned = False  # one_blas_thread_for_process was called: OpenBLAS stays on one thread, the guard changes nothing


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread while any caller is inside, whichever thread it runs on. Concurrent callers
    run side by side (no lock is held over their work); the original thread counts are back when all are out."""
    global _limit, _users
    with _lock:
        if _users == 0 and not _pinned:
            with _in_control():
                _limit = _threadpools().limit(limits=1, user_api="blas")
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _limit is not None:
                with _in_control():
                    _limit.restore_original_limits()
                _limit = None


def one_blas_thread_for_process() -> None:
    """BLAS on one thread for the rest of this process's life, whichever thread calls (module docstring). Call
    it once the libraries are loaded (it sees those loaded by then). Safe in a forked child (the lock is renewed
    at the fork). A guard already inside keeps its own limit and, on leaving, lands on this one."""
    global _limit, _pinned
    from threadpoolctl import ThreadpoolController  # deferred: scans the libraries loaded now

    with _lock:
        with _in_control():
            ThreadpoolController().limit(limits=1, user_api="blas")
        _limit = None  # a guard inside would restore the count it found on entering
        _pinned = True


def blas_threads() -> list[int]:
    """Each loaded BLAS library's thread count now (numpy's and scipy's OpenBLAS may be two): what runs, not
    what was asked."""
    from threadpoolctl import threadpool_info  # deferred: scans the loaded libraries

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def _threadpools() -> Any:
    """threadpoolctl's ThreadpoolController, made on first use (called under ``_lock``)."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController  # deferred: loaded by the first NER call

        _controller = ThreadpoolController()
    return _controller


def _after_fork_in_child() -> None:
    """A forked child starts with no caller inside and a free lock, whatever the parent's threads held (the
    controller is kept: its library handles are valid in the child, and rescanning would take the loader's
    lock, which another parent thread may have held at the fork too)."""
    global _lock, _limit, _users
    _lock, _limit, _users = threading.Lock(), None, 0  # the pin (process-wide, like the count itself) is kept


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def _in_control() -> Iterator[None]:
    """This thread as threadpoolctl's controlling thread for OpenBLAS for the block, then no thread (so the next
    change, from any thread, takes effect). Called under ``_lock``."""
    from threadpoolctl import OpenBLASController

    OpenBLASController.clear_controlling_thread(force=True)
    try:
        yield
    finally:
        OpenBLASController.clear_controlling_thread(force=True)
