"""Entity-name embeddings as Neo4j stores them: float32 bytes, and the float lists of older graphs."""

from __future__ import annotations

import numpy as np

from ragloom.stores.neo4j import decode_vectors, encode_vector


def test_vectors_round_trip_through_bytes_and_older_float_lists_still_read():
    vectors = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    stored = [encode_vector(v) for v in vectors]
    assert all(isinstance(b, bytes) and len(b) == 5 * 4 for b in stored)
    assert np.array_equal(decode_vectors(stored), vectors)
    mixed = decode_vectors([stored[0], vectors[1].tolist(), stored[2]])  # a graph written partly before bytes
    assert mixed.dtype == np.float32 and np.array_equal(mixed, vectors)
    assert decode_vectors([]).shape == (0, 0)
