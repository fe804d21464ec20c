"""multi_hop's choice of bridge entities, on a graph small enough to list by hand."""

from __future__ import annotations

from ragloom.retrieval.graph_index import build_graph
from ragloom.retrieval.multi_hop import MultiHopRetriever
from ragloom.types import RetrievedItem


def _item(chunk_id: str) -> RetrievedItem:
    return RetrievedItem(chunk_id=chunk_id, document_id=chunk_id, text="", score=1.0, rank=1, heading_path=[],
                         lane_scores={}, metadata={})


def _graph():
    # c0 (the best hit) names: Bonetti (the query's entity), Chelsea (also in c2, c3), Putney (only in c0) and
    # London (a hub: c1, c2, c3, c4); c4 belongs to another tenant
    def chunk(cid, scope, *entities):
        return {"chunk_id": cid, "scope_path": scope, "entity_ids": list(entities), "counts": [1] * len(entities)}

    rows = {
        "chunks": [chunk("c0", "__shared__", "bonetti", "chelsea", "putney", "london"),
                   chunk("c1", "__shared__", "london"),
                   chunk("c2", "__shared__", "chelsea", "london"),
                   chunk("c3", "globex", "chelsea", "london"),
                   chunk("c4", "globex", "london")],
        "entities": [{"entity_id": e, "name": e.title(), "type": "ORG", "norm": e}
                     for e in ("bonetti", "chelsea", "putney", "london")],
        "relations": [],
    }
    return build_graph(rows)


def names(graph, entities):
    return [graph.entity_names[e] for e in entities]


def test_bridges_lead_to_chunks_not_yet_retrieved_most_specific_first():
    graph = _graph()
    walk = graph.walk_matrix(None)
    bonetti = graph.match_names(["bonetti"])[0]
    top, retrieved = [_item("c0")], [_item("c0"), _item("c1")]
    bridges = MultiHopRetriever._bridges(graph, walk, top, retrieved, {bonetti}, limit=5)
    # Putney leads only back to c0; Chelsea (3 chunks) is more specific than London (5); Bonetti is the query's
    assert names(graph, bridges) == ["Chelsea", "London"]
    assert names(graph, MultiHopRetriever._bridges(graph, walk, top, retrieved, {bonetti}, limit=1)) == ["Chelsea"]
    # once c2 and c3 are retrieved too, Chelsea leads nowhere new either
    more = [*retrieved, _item("c2"), _item("c3")]
    assert names(graph, MultiHopRetriever._bridges(graph, walk, top, more, {bonetti}, limit=5)) == ["London"]


def test_bridges_count_only_chunks_the_query_may_read():
    graph = _graph()
    walk = graph.walk_matrix(["__shared__"])
    bonetti = graph.match_names(["bonetti"])[0]
    top = [_item("c0")]
    # c2 is readable and not retrieved: Chelsea still leads somewhere
    assert names(graph, MultiHopRetriever._bridges(graph, walk, top, [_item("c0")], {bonetti}, 5)) == \
        ["Chelsea", "London"]
    # with c1 and c2 retrieved, only globex's chunks would be new: nothing readable is left to bridge to
    retrieved = [_item("c0"), _item("c1"), _item("c2")]
    assert MultiHopRetriever._bridges(graph, walk, top, retrieved, {bonetti}, 5) == []
    # unscoped, the same call bridges to globex's chunks
    assert names(graph, MultiHopRetriever._bridges(graph, graph.walk_matrix(None), top, retrieved, {bonetti}, 5)) \
        == ["Chelsea", "London"]
    # a chunk the graph does not hold (or another strategy's) is skipped
    assert MultiHopRetriever._bridges(graph, walk, [_item("nope")], [], set(), 5) == []
