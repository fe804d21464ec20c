"""Scope isolation over the real stores: for generated tenant/user/chat/agent layouts, no query (dense, bm25,
hybrid, graph_rag; any scope, adversarial text and filters) ever returns, names or counts anything from a
scope outside the query's ``visible_paths()``.

Every scope's documents name a person no other scope mentions (its "secret") and a company every scope
mentions, so the entity graph links all scopes together and a graph walk from a visible seed reaches
invisible people: exactly what must not come back.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from reliability_support import STRATEGY, HashEmbedder

from ragloom.api import Ragloom
from ragloom.errors import FilterError, ScopeError
from ragloom.extraction import EntityExtractor
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.retrieval.postprocess import GRAPH_SOURCE
from ragloom.types import Chunk, Scope, make_chunk_id

LAYOUT_SEEDS = (11, 23, 37)
QUERIES_PER_LAYOUT = 40
STRATEGIES = ("dense", "bm25", "hybrid", "graph_rag")
FIRST = ["Zelda", "Orin", "Mirela", "Tobias", "Ysolde", "Kasimir", "Anouk", "Leopold", "Sunniva", "Evander",
         "Brigida", "Casimir", "Odalys", "Florian", "Henrike", "Ignatius", "Jolanda", "Lysander", "Marisol", "Quentin"]
LAST = ["Quorvath", "Blenkinsop", "Drummelow", "Vantrees", "Okonkwo", "Szabadi", "Ferreira", "Lindqvist", "Haverkamp",
        "Tremaine", "Castellano", "Mbeki", "Novakova", "Ishikawa", "Delacroix", "Abernathy", "Kowalczyk", "Rasmussen"]
COMPANY = "Globex Corporation"


@dataclass
class Layout:
    seed: int
    scopes: list[Scope]
    secret: dict[str, str] = field(default_factory=dict)  # scope path -> the person only it mentions
    chunks: list[Chunk] = field(default_factory=list)
    scope_of: dict[str, str] = field(default_factory=dict)  # chunk id -> scope path
    documents: dict[str, str] = field(default_factory=dict)  # document id -> scope path


def make_layout(seed: int) -> Layout:
    rng = random.Random(seed)
    scopes = [Scope()]
    for t in range(rng.randint(2, 3)):
        tenant = f"t{t}-{rng.randrange(1000)}"
        scopes.append(Scope(tenant))
        for u in range(rng.randint(1, 2)):
            scopes.append(Scope(tenant, f"u{u}"))
            for c in range(rng.randint(1, 2)):
                scopes.append(Scope(tenant, f"u{u}", f"c{c}"))
                if rng.random() < 0.5:
                    scopes.append(Scope(tenant, f"u{u}", f"c{c}", "agent"))
    names = rng.sample([f"{f} {last}" for f in FIRST for last in LAST], len(scopes))
    layout = Layout(seed, scopes)
    for scope, name in zip(scopes, names, strict=True):
        layout.secret[scope.path] = name
        for d in range(2):
            doc = f"{scope.path}/notes-{d}.md"
            text = (f"{name} leads the Helios budget review at {COMPANY}. Notes {d} of {scope.path}: {name} "
                    f"met {COMPANY} about the Helios budget and the quarterly review.")
            chunk = Chunk(chunk_id=make_chunk_id(doc, STRATEGY, "whole", 0, len(text), text), document_id=doc,
                          strategy=STRATEGY, text=text, start=0, end=len(text), token_count=len(text.split()),
                          position=0, metadata={"title": f"Notes of {name}", "source_path": doc,
                                                "owner": scope.tenant or "shared"}, scope=scope)
            layout.chunks.append(chunk)
            layout.scope_of[chunk.chunk_id] = scope.path
            layout.documents[doc] = scope.path
    return layout


def layout_nlp(layout: Layout):
    """Recognizes the layout's people and the company, at ingestion and in queries alike."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("entity_ruler").add_patterns(
        [{"label": "PERSON", "pattern": n} for n in layout.secret.values()] + [{"label": "ORG", "pattern": COMPANY}])
    return nlp


@pytest.fixture(scope="module", params=LAYOUT_SEEDS, ids=[f"layout{s}" for s in LAYOUT_SEEDS])
def ingested(request, settings, module_weaviate_store_factory, module_neo4j_store_factory):
    """A layout written to both stores under a namespace of its own (removed, and checked gone, after the module);
    the retrieval API over it."""
    layout = make_layout(request.param)
    ns = f"Iso{request.param}x{random.randrange(10**8)}"
    vectors, graph = module_weaviate_store_factory(ns), module_neo4j_store_factory(ns)
    nlp = layout_nlp(layout)
    sync_vectors(vectors, HashEmbedder(), STRATEGY, layout.chunks)
    sync_graph(graph, EntityExtractor(nlp), STRATEGY, layout.chunks)
    return layout, Ragloom(settings, vectors=vectors, graph=graph, embedder=HashEmbedder(), nlp=nlp)


def query_scopes(layout: Layout) -> st.SearchStrategy[Scope]:
    existing = st.sampled_from(layout.scopes)
    # scopes nobody wrote to: a new user next to real ones, a chat of a real user, a tenant that does not exist
    invented = st.sampled_from([Scope(s.tenant, "intruder") for s in layout.scopes if s.tenant]
                               + [Scope(s.tenant, s.user, "new-chat") for s in layout.scopes if s.user]
                               + [Scope("no-such-tenant"), Scope("no-such-tenant", layout.scopes[1].user or "u0")])
    return st.one_of(existing, invented)


def adversarial(layout: Layout, scope: Scope, draw) -> dict | str | None:
    """Filters that try to reach another scope's documents."""
    visible = set(scope.visible_paths())
    others = sorted(d for d, p in layout.documents.items() if p not in visible) or sorted(layout.documents)
    own = sorted(d for d, p in layout.documents.items() if p in visible)
    other = draw(st.sampled_from(others))
    options = [
        None,
        {"document_id": other},
        {"document_id": sorted(layout.documents)},
        {"not": {"document_id": own or ["-"]}},
        {"source_path": {"contains": other.split("/")[0]}},
        {"title": {"contains": "*"}},
        {"title": {"contains": layout.secret[layout.documents[other]]}},
        {"owner": {"not": scope.tenant or "shared"}},
        {"not": {"not": {"document_id": other}}},
        json.dumps({"document_id": other}),
        {"scope_path": layout.documents[other]},  # refused: scope is never a filter
        {"scope_tenant": "x"},
        {"Scope_Path": layout.documents[other]},  # a metadata key no chunk has
    ]
    return draw(st.sampled_from(options))


def visible_names(layout: Layout, scope: Scope) -> tuple[set[str], set[str]]:
    visible = set(scope.visible_paths())
    seen = {name for path, name in layout.secret.items() if path in visible}
    return seen, set(layout.secret.values()) - seen


def run_queries(layout: Layout, rag: Ragloom, check, examples: int, stats: dict) -> dict:
    stats.update({"queries": 0, "items": 0, "refused": 0, "graph_context_items": 0, "leaks": 0, "by_strategy": {}})

    @hypothesis_settings(max_examples=examples, deadline=None, database=None,
                         suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data())
    def one(data):
        scope = data.draw(query_scopes(layout))
        strategy = data.draw(st.sampled_from(STRATEGIES))
        target_path = data.draw(st.sampled_from(sorted(layout.secret)))
        target = layout.secret[target_path]
        text = data.draw(st.sampled_from([f"What does {target} lead?", f"{target} {COMPANY}", "Helios budget review",
                                          f"notes of {target} in {target_path}", COMPANY]))
        filters = adversarial(layout, scope, data.draw)
        try:
            result = rag.query(text, strategy=strategy, k=10, filters=filters, scope=scope, abstain=False)
        except (FilterError, ScopeError):
            stats["refused"] += 1
            return
        stats["queries"] += 1
        stats["items"] += len(result.items)
        stats["by_strategy"][strategy] = stats["by_strategy"].get(strategy, 0) + 1
        check(layout, scope, result, stats)

    one()
    return stats


def check_items(layout: Layout, scope: Scope, result, stats) -> None:
    visible = set(scope.visible_paths())
    _, hidden = visible_names(layout, scope)
    for item in result.items:
        if item.metadata.get("source") == GRAPH_SOURCE:
            stats["graph_context_items"] += 1
            assert not [n for n in hidden if n in item.text], (scope.path, item.text)
            continue
        assert layout.scope_of.get(item.chunk_id) in visible, (scope.path, item.chunk_id, item.document_id)
        assert item.metadata.get("scope_path") in visible
        assert not [n for n in hidden if n in item.text]


def test_no_result_comes_from_outside_the_visible_scopes(ingested, report):
    layout, rag = ingested
    stats = run_queries(layout, rag, check_items, QUERIES_PER_LAYOUT, {})
    report(layout_seed=layout.seed, scopes=len(layout.scopes), chunks=len(layout.chunks), **stats)
    assert stats["items"] > 0 and stats["refused"] < stats["queries"] + stats["refused"]


def check_metadata(layout: Layout, scope: Scope, result, stats) -> None:
    """The whole result (items, their metadata, the result's metadata) names no hidden person the query itself did
    not name (the query text and filters are echoed back in the metadata: that is not a leak)."""
    _, hidden = visible_names(layout, scope)
    asked = result.query + json.dumps(result.metadata.get("filters"), default=str)
    blob = json.dumps({"metadata": result.metadata, "items": [i.__dict__ for i in result.items]}, default=str)
    leaked = sorted(n for n in hidden if n in blob and n not in asked)
    stats["leaks"] += bool(leaked)
    assert not leaked, (f"a {result.metadata.get('strategy')} query in scope {scope.path!r} reveals names from "
                        f"other scopes: {leaked} in {json.dumps(result.metadata.get('graph'), default=str)}")


def test_no_result_metadata_names_anything_outside_the_visible_scopes(ingested, report):
    layout, rag = ingested
    stats: dict = {"leaks": 0}
    try:
        # first, for certain: each tenant asks graph_rag about another tenant's person by first name only
        tenants = [s for s in layout.scopes if s.tenant and not s.user]
        for scope, other in zip(tenants, tenants[1:] + tenants[:1], strict=True):
            first_name = layout.secret[other.path].split()[0]
            result = rag.query(f"What does {first_name} do?", strategy="graph_rag", k=10, scope=scope, abstain=False)
            check_metadata(layout, scope, result, stats)
        run_queries(layout, rag, check_metadata, QUERIES_PER_LAYOUT // 2, stats)
    finally:
        report(layout_seed=layout.seed, **stats)
