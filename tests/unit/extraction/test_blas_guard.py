"""The counted one-BLAS-thread guard in a forked child: free whatever the parent's threads held at the fork."""

from __future__ import annotations

import multiprocessing

import pytest

from ragloom.extraction import blas


def _enter_and_leave(queue) -> None:
    with blas.one_blas_thread():
        queue.put(blas._users)
    queue.put(blas._users)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="fork is Linux's start method")
def test_a_child_forked_while_a_thread_holds_the_guard_s_lock_can_use_it():
    """Extraction forks its workers while the service's query threads may be inside the guard: a child that
    inherited the lock held would wait forever on its first use."""
    with blas.one_blas_thread():  # the parent has used the guard (its queries' NER) before it forks
        pass
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with blas._lock:  # as another thread of the parent would be, at the moment of the fork
        child = context.Process(target=_enter_and_leave, args=(queue,))
        child.start()
    child.join(timeout=30)
    stuck = child.is_alive()
    if stuck:
        child.kill()
    assert not stuck, "the child waited on the lock its parent held at the fork"
    assert child.exitcode == 0
    assert [queue.get(timeout=5), queue.get(timeout=5)] == [1, 0]
