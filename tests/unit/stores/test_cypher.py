"""Cypher builders: constant query text, data only in parameters; and no string-built Cypher anywhere in ragloom/."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from ragloom.stores import cypher

RAGLOOM = Path(__file__).resolve().parents[3] / "ragloom"
HOSTILE = 'x"}) DETACH DELETE n //'
CYPHER_WORDS = re.compile(r"\b(MATCH|MERGE|CREATE|DELETE|DETACH|UNWIND)\b")


def _builders():
    """Every public builder in cypher.py, called with hostile values for every argument."""
    calls = {
        "upsert_chunks": (HOSTILE, [{"chunk_id": HOSTILE}]),
        "link_parents": (HOSTILE, [{"parent_id": HOSTILE, "chunk_id": HOSTILE}]),
        "unlink_next": (HOSTILE, [{"document_id": HOSTILE, "strategy": HOSTILE}]),
        "link_next": (HOSTILE, [{"source": HOSTILE, "target": HOSTILE}]),
        "upsert_entities": (HOSTILE, [{"entity_id": HOSTILE, "name": HOSTILE}]),
        "write_mentions": (HOSTILE, [{"chunk_id": HOSTILE, "entity_id": HOSTILE, "count": 1, "labels": [HOSTILE],
                                      "label_counts": [1], "cues": [HOSTILE], "cue_counts": [1]}]),
        "write_relations": (HOSTILE, [{"source": HOSTILE, "target": HOSTILE, "type": HOSTILE}]),
        "mark_extracted": (HOSTILE, [HOSTILE]),
        "update_entity_counts": (HOSTILE, [HOSTILE]),
        "set_types": (HOSTILE, [{"entity_id": HOSTILE, "type": HOSTILE}]),
        "write_entity_embeddings": (HOSTILE, [{"entity_id": HOSTILE, "embedding": [0.1]}], HOSTILE, HOSTILE),
        "drop_synonyms": (HOSTILE, [HOSTILE]),
        "write_synonyms": (HOSTILE, [{"source": HOSTILE, "target": HOSTILE, "score": 0.9}]),
        "entities_to_embed": (HOSTILE, HOSTILE, HOSTILE, [HOSTILE]),
        "entity_embeddings": (HOSTILE, HOSTILE, HOSTILE),
        "synonym_edges": (HOSTILE,),
        "stamp_version": (HOSTILE, HOSTILE, HOSTILE),
        "graph_version": (HOSTILE, HOSTILE),
        "removal_scope": (HOSTILE, [HOSTILE]),
        "rescope_document": (HOSTILE, HOSTILE, [HOSTILE], HOSTILE),
        "withdraw_evidence": (HOSTILE, [HOSTILE]),
        "delete_chunks": (HOSTILE, [HOSTILE]),
        "delete_orphan_entities": (HOSTILE, [HOSTILE]),
        "delete_empty_documents": (HOSTILE, [HOSTILE]),
        "clear_label": (HOSTILE, "Entity"),
        "chunk_states": (HOSTILE, HOSTILE),
        "chunk_ids": (HOSTILE, HOSTILE),
        "entity_keys": (HOSTILE,),
        "entities_by_names": (HOSTILE, [HOSTILE], 5),
        "stats": (HOSTILE, HOSTILE),
        "entity_degrees": (HOSTILE,),
        "empty_entity_names": (HOSTILE,),
        "dangling_mentions": (HOSTILE,),
        "retrieval_chunks": (HOSTILE, HOSTILE),
        "retrieval_entities": (HOSTILE,),
        "retrieval_relations": (HOSTILE,),
        "retrieval_synonyms": (HOSTILE,),
        "retrieval_name_vectors": (HOSTILE, [HOSTILE]),
        "name_embedding_models": (HOSTILE,),
    }
    public = {name for name, fn in inspect.getmembers(cypher, inspect.isfunction)
              if fn.__module__ == cypher.__name__ and not name.startswith("_")} - {"batched"}
    assert public == set(calls), f"builders without a test call: {public ^ set(calls)}"
    return calls


@pytest.mark.parametrize(("name", "args"), sorted(_builders().items()))
def test_builders_keep_data_out_of_query_text(name, args):
    query, params = getattr(cypher, name)(*args)
    assert HOSTILE not in query
    assert params["ns"] == HOSTILE
    assert "$ns" in query  # every statement is scoped to the namespace
    # The text is one of the module's constants, whatever the values.
    constants = {v for v in vars(cypher).values() if isinstance(v, str)} | set(cypher.CLEAR_LABEL.values())
    assert query in constants


def test_chunk_ids_with_and_without_strategy():
    assert cypher.chunk_ids("ns")[1] == {"ns": "ns"}
    assert cypher.chunk_ids("ns", "recursive")[1] == {"ns": "ns", "strategy": "recursive"}


def test_stamp_version_with_and_without_strategy():
    assert cypher.stamp_version("ns", "recursive", "v")[1] == {"ns": "ns", "strategy": "recursive", "version": "v"}
    query, params = cypher.stamp_version("ns", None, "v")
    assert params == {"ns": "ns", "version": "v"} and "MERGE" not in query


def test_entities_to_embed_of_some_or_all():
    assert cypher.entities_to_embed("ns", "m", "p", ["a"])[1] == {"ns": "ns", "model": "m", "linked": "p",
                                                                  "entity_ids": ["a"]}
    query, params = cypher.entities_to_embed("ns", "m", "p")
    assert params == {"ns": "ns", "model": "m", "linked": "p"} and "UNWIND" not in query


def test_clear_label_accepts_only_known_labels():
    with pytest.raises(ValueError):
        cypher.clear_label("ns", "Entity) DETACH DELETE (n")


def test_batched():
    assert cypher.batched(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert cypher.batched([], 3) == []


def test_schema_uses_composite_namespace_keys_and_is_idempotent():
    constraints = [s for s in cypher.SCHEMA if "CONSTRAINT" in s]
    assert len(constraints) == 4
    assert all("IF NOT EXISTS" in s for s in cypher.SCHEMA)
    assert all("REQUIRE (" in s and ".ns, " in s and "IS UNIQUE" in s for s in constraints)


# --- no string-built Cypher in ragloom/ ----------------------------------------------------------------


def _has_cypher(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and CYPHER_WORDS.search(n.value)
               for n in ast.walk(node))


def string_built_cypher(source: str, filename: str = "<src>") -> list[str]:
    """Places where Cypher-looking text is built from pieces: f-strings, %, .format, + or join."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        hit = None
        if isinstance(node, ast.JoinedStr) and _has_cypher(node):
            hit = "f-string"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)) and _has_cypher(node):
            hit = "% or + on a string"
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and _has_cypher(node.value):
            hit = "+= on a string"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("format", "join", "replace") and _has_cypher(node)):
            hit = f".{node.func.attr}()"
        if hit:
            found.append(f"{filename}:{node.lineno}: {hit}")
    return found


@pytest.mark.parametrize("snippet", [
    'q = f"MATCH (n {{name: \'{name}\'}}) RETURN n"',
    'q = "MATCH (n) WHERE n.name = \'%s\' RETURN n" % name',
    'q = "MERGE (n:X {id: \'{}\'})".format(x)',
    'q = "CREATE (n:X {name: \'" + name + "\'})"',
    'q = "MATCH (n)"\nq += " DETACH DELETE n"',
    'q = " ".join(["UNWIND $rows AS row", clause])',
])
def test_scanner_catches_string_built_cypher(snippet):
    assert string_built_cypher(snippet)


def test_scanner_lets_constants_and_parameters_pass():
    assert not string_built_cypher('Q = "MATCH (n {id: $id}) RETURN n"\nrun(Q, {"id": value})')
    assert not string_built_cypher('msg = f"deleted {n} chunks"')  # prose, not Cypher


def test_no_string_built_cypher_in_ragloom():
    files = sorted(RAGLOOM.rglob("*.py"))
    assert len(files) > 10
    found = [hit for path in files for hit in string_built_cypher(path.read_text(encoding="utf-8"), str(path))]
    assert not found, "Cypher must be a constant with parameters (ragloom/stores/cypher.py):\n" + "\n".join(found)
