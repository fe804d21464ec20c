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
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

_lock = threading.Lock()  # guards the three below; never held while the caller's work runs
_controller: Any = None  # threadpoolctl's ThreadpoolController, made on first use (it scans the loaded libraries)
_limit: Any = None  # the one-thread limit in force while _users > 0
_users = 0


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread while any caller is inside, whichever thread it runs on. Concurrent callers
    run side by side (no lock is held over their work); the original thread counts are back when all are out."""
    global _controller, _limit, _users
    with _lock:
        if _controller is None:
            from threadpoolctl import ThreadpoolController  # deferred: loaded by the first NER call

            _controller = ThreadpoolController()
        if _users == 0:
            with _in_control():
                _limit = _controller.limit(limits=1, user_api="blas")
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                with _in_control():
                    _limit.restore_original_limits()
                _limit = None


def worker_blas_thread() -> None:
    """One BLAS thread for the rest of a forked worker process's life (the extraction workers: the processes are
    the parallelism). The worker has one thread, so threadpoolctl's control is free (the parent's threads are not
    alive in the child); the counted guard is not used, its lock may have been held by a parent thread at fork."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _after_fork_in_child() -> None:
    """A forked child starts with no caller inside and a free lock, whatever the parent's threads held (the
    controller is kept: its library handles are valid in the child, and rescanning would take the loader's
    lock, which another parent thread may have held at the fork too)."""
    global _lock, _limit, _users
    _lock, _limit, _users = threading.Lock(), None, 0


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
