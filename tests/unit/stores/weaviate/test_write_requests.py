"""How many insert requests a write keeps in flight, and in how many processes a sync writes, when the settings
leave it to the machine."""

from __future__ import annotations

import pytest

from ragloom.settings import Settings
from ragloom.stores.weaviate import WeaviateStore
from ragloom.stores.weaviate.writer_processes import default_write_processes
from ragloom.stores.weaviate.writes import default_write_requests


@pytest.mark.parametrize("cpus,expected", [(None, 1), (1, 1), (2, 1), (4, 1), (6, 3), (16, 8), (64, 8)])
def test_one_request_on_a_few_cores_and_half_the_cores_up_to_eight_beyond(cpus, expected):
    assert default_write_requests(cpus) == expected


@pytest.mark.parametrize("cpus,expected", [(None, 1), (2, 1), (8, 1), (12, 3), (16, 4), (64, 4)])
def test_the_syncing_process_writes_alone_up_to_eight_cores_then_one_writer_per_four_cores_up_to_four(cpus, expected):
    assert default_write_processes(cpus) == expected


def test_writer_processes_share_out_the_insert_requests_of_a_write():
    store = WeaviateStore(object(), "Unit")  # no connection is opened: only the counts are read
    store.write_requests, store.write_processes = 8, 4
    assert store.requests_per_write == 8  # a store made without settings has no writer processes
    store.settings = Settings()
    assert store.requests_per_write == 2
    store.write_processes = 16
    assert store.requests_per_write == 1
    store.write_processes = 1
    assert store.requests_per_write == 8
