"""Turning a Weaviate answer into items (ragloom.stores.weaviate.reads), on objects shaped like the client's."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np

from ragloom.metadata import MetadataLayout
from ragloom.stores.weaviate.reads import _floats, _item


def _object(vector) -> SimpleNamespace:
    return SimpleNamespace(properties={"chunk_id": "c1", "document_id": "d1", "text": "the text", "embed_text": "x",
                                       "bm25_text": "x", "heading_path": "A > B", "title": "T"},
                           vector={"default": vector}, metadata=SimpleNamespace(score=0.5, distance=None))


def test_a_decoded_vector_comes_back_as_python_floats_equal_to_the_stored_ones():
    stored = np.random.default_rng(0).normal(size=384).astype(np.float32)
    # what the client's gRPC decoding gives: Python floats unpacked from float32 bytes
    decoded = list(struct.unpack("384f", stored.tobytes()))
    item = _item(_object(decoded), 0.5, {"hybrid": 0.5}, True, MetadataLayout())
    vector = item.metadata["vector"]
    assert type(vector) is list and all(type(x) is float for x in vector)
    assert np.array_equal(np.asarray(vector, dtype=np.float32), stored)
    assert vector is not decoded  # a copy: the item does not share the client's list


def test_floats_converts_what_is_not_a_python_float():
    assert _floats([1, np.float32(0.5)]) == [1.0, 0.5] and all(type(x) is float for x in _floats([1, np.float32(2)]))
    assert _floats([]) == []


def test_without_vectors_none_is_kept_out_and_the_texts_for_search_are_dropped():
    item = _item(_object(None), 0.5, {"hybrid": 0.5}, False, MetadataLayout())
    assert "vector" not in item.metadata
    assert item.text == "the text" and item.heading_path == ["A", "B"]
    assert not {"embed_text", "bm25_text", "text", "chunk_id"} & set(item.metadata)
