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


def _pin_with_a_guard_inside(queue) -> None:
    """In a child (the pin is for good): two BLAS threads, a guard entered on another thread, the pin, the guard
    left; then a guard entered and left again. What OpenBLAS runs at each step goes to ``queue``."""
    import threading

    import numpy  # noqa: F401  (loads OpenBLAS)
    from threadpoolctl import OpenBLASController, threadpool_limits

    blas._controller = None  # the guard's controller sees the libraries loaded now (the parent's may predate numpy)
    threadpool_limits(limits=2, user_api="blas")
    OpenBLASController.clear_controlling_thread(force=True)
    queue.put(blas.blas_threads())
    inside, leave = threading.Event(), threading.Event()

    def guarded() -> None:
        with blas.one_blas_thread():
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=guarded)
    worker.start()
    inside.wait(10)
    blas.one_blas_thread_for_process()
    leave.set()
    worker.join()
    queue.put(blas.blas_threads())  # the guard left after the pin: it must not restore the two threads
    with blas.one_blas_thread():
        pass
    queue.put(blas.blas_threads())


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="fork is Linux's start method")
def test_a_process_pinned_to_one_blas_thread_stays_there_whatever_the_guard_does():
    """The service pins BLAS to one thread once warm, while a query's NER may be inside the counted guard on
    another thread: that guard, on leaving, restored the count it found (two) and undid the pin."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_pin_with_a_guard_inside, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    before, after_guard, after_another = (queue.get(timeout=5) for _ in range(3))
    assert before and set(before) == {2}, before
    assert set(after_guard) == {1} and set(after_another) == {1}, (after_guard, after_another)
