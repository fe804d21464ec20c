"""graph_rag's traversal controls and explaining context item on the real stores, from every door (Python API,
CLI, HTTP service), the chain questions judged, and the playground's graph view in a headless Chromium.

The sample corpus goes into this module's own collections and graph namespace (deleted afterwards); a real
`ragloom serve` process answers the service and the playground.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import uuid
from pathlib import Path

import httpx
import pytest
from polling import free_port, ragloom_serve

from ragloom.api import Ragloom
from ragloom.chunking import chunker_for
from ragloom.cli import main
from ragloom.embedding import make_embedder
from ragloom.evaluation.graph_chains import context_graph, judge, load_chains
from ragloom.extraction import EntityExtractor, load_nlp
from ragloom.indexing.graph import sync_graph
from ragloom.indexing.vectors import sync_vectors
from ragloom.parsing import parse_sources
from ragloom.service import docs
from ragloom.service.keys import KeyStore
from ragloom.settings import REPO_ROOT, SAMPLE_CORPUS, Settings

QUESTION = "Who leads the team that owns the HarborSight platform?"
ARTIFACTS = REPO_ROOT / "test-artifacts"
# the walk answers every query here (its gate and cap have their own tests): these tests are about the walk
BASE = {"abstain": False, "max_named": 1000, "min_overlap": 0.0, "min_average_overlap": 0.0, "walk_slots": 1000}


@dataclasses.dataclass
class Corpus:
    settings: Settings
    rag: Ragloom
    graph: object
    root: Path


@pytest.fixture(scope="module")
def corpus(settings: Settings, tmp_path_factory, module_weaviate_store_factory, module_neo4j_store_factory) -> Corpus:
    tag = uuid.uuid4().hex[:8]
    vectors, graph = module_weaviate_store_factory(f"TestGv{tag}"), module_neo4j_store_factory(f"test_gv_{tag}")
    root = tmp_path_factory.mktemp("graph_view")
    ns = dataclasses.replace(settings, collection_prefix=vectors.prefix, graph_namespace=graph.namespace,
                             artifacts_path=root / "artifacts")
    documents = parse_sources([SAMPLE_CORPUS], SAMPLE_CORPUS).documents
    embedder, nlp = make_embedder(settings), load_nlp(settings.spacy_model)
    chunks = chunker_for("recursive", embedder).chunk_many(documents)
    sync_vectors(vectors, embedder, "recursive", chunks)
    sync_graph(graph, EntityExtractor(nlp), "recursive", chunks)
    return Corpus(ns, Ragloom(ns, vectors=vectors, graph=graph, embedder=embedder, nlp=nlp), graph, root)


def _graph_rag(corpus: Corpus, question: str = QUESTION, k: int = 5, **options):
    result = corpus.rag.query(question, strategy="graph_rag", k=k, **BASE, **options)
    assert result.metadata.strategy == "graph_rag" and not result.metadata.fallbacks, result.metadata
    return result


def _mentioned(corpus: Corpus, chunk_ids: list[str]) -> dict[str, set[str]]:
    """Chunk id -> names of the entities Neo4j says it mentions."""
    rows, _, _ = corpus.graph.driver.execute_query(
        "MATCH (c:Chunk {ns: $ns})-[:MENTIONS]->(e:Entity) WHERE c.chunk_id IN $ids "
        "RETURN c.chunk_id AS chunk_id, collect(e.name) AS names", ns=corpus.graph.namespace, ids=chunk_ids)
    return {r["chunk_id"]: set(r["names"]) for r in rows}


def _chunks_of(corpus: Corpus, entity_id: str) -> set[str]:
    rows, _, _ = corpus.graph.driver.execute_query(
        "MATCH (c:Chunk {ns: $ns, strategy: 'recursive'})-[:MENTIONS]->(e:Entity {ns: $ns, entity_id: $id}) "
        "RETURN c.chunk_id AS chunk_id", ns=corpus.graph.namespace, id=entity_id)
    return {r["chunk_id"] for r in rows}


# the Python API ------------------------------------------------------------------------------------------


def test_context_item_explains_the_issues_question_with_typed_cited_edges(corpus):
    result = _graph_rag(corpus)
    context = result.items[0]
    graph = context.metadata["graph"]
    names = {n["entity_id"]: n["name"] for n in graph["nodes"]}
    typed = {(names[e["source"]], e["type"], names[e["target"]]) for e in graph["edges"] if e["family"] == "svo"}
    # the issue's chain: HarborSight <- builds - Data Services team - led by -> Rafael Moreno
    assert ("Data Services", "BUILD", "HarborSight") in typed and ("Rafael Moreno", "LEAD", "Data Services") in typed
    families = [e["family"] for e in graph["edges"]]
    assert families == sorted(families, key=lambda f: f == "co_occurs")  # typed before co-occurrence
    assert len(graph["edges"]) <= 30  # context_edges
    # each edge cites a chunk that mentions both of its entities
    cited = _mentioned(corpus, [e["chunk_id"] for e in graph["edges"]])
    for edge in graph["edges"]:
        assert {names[edge["source"]], names[edge["target"]]} <= cited[edge["chunk_id"]], edge
    assert judge(load_chains()[0], graph).found


def test_max_hops_keeps_the_walk_near_the_seeds(corpus):
    walk_only = {"passage_weight": 0.0, "lane_head": 0, "graph_context": False, "max_seeds": 2, "k": 30}
    near = _graph_rag(corpus, max_hops=1, **walk_only)
    seeds = set(near.metadata.details["graph"]["seeds"])
    walked = [i.chunk_id for i in near.items if i.lane_scores.get("graph", 0) > 0]
    assert walked
    # one hop from entity seeds: a chunk that mentions a seed, nothing further
    assert all(names & seeds for names in _mentioned(corpus, walked).values())
    far = _graph_rag(corpus, **walk_only)
    far_walked = [i.chunk_id for i in far.items if i.lane_scores.get("graph", 0) > 0]
    assert any(not (names & seeds) for names in _mentioned(corpus, far_walked).values())  # the bound mattered


def test_relation_filter_decides_which_edges_are_walked_and_explained(corpus):
    typed = _graph_rag(corpus, relations=["LEAD", "BUILD", "OWN"]).items[0].metadata["graph"]
    assert typed["edges"] and {e["type"] for e in typed["edges"]} <= {"LEAD", "BUILD", "OWN"}
    cooccurring = _graph_rag(corpus, relations=["co_occurs"]).items[0].metadata["graph"]
    assert cooccurring["edges"] and {e["family"] for e in cooccurring["edges"]} == {"co_occurs"}
    # "led by" is not how the extractor writes the predicate (LEAD): the result says so
    unknown = _graph_rag(corpus, relations=["led by", "svo"])
    assert unknown.metadata.details["graph"]["unknown_relations"] == ["LED_BY"]


def test_context_format_json_carries_the_same_edges(corpus):
    item = _graph_rag(corpus, context_format="json").items[0]
    document = json.loads(item.text)
    assert item.metadata["format"] == "json"
    assert [(e["source"], e["type"], e["target"], e["chunk_id"]) for e in document["edges"]] == \
        [(e["source"], e["type"], e["target"], e["chunk_id"]) for e in item.metadata["graph"]["edges"]]


def test_chain_questions(corpus):
    """The ten-plus questions of tests/data/graph_chains.json: at least half their chains appear in full."""
    judgements = [judge(q, context_graph(_graph_rag(corpus, q.question))) for q in load_chains()]
    found = sum(j.found for j in judgements)
    edges, typed = sum(j.edges for j in judgements), sum(j.typed_edges for j in judgements)
    print(f"chains found {found}/{len(judgements)}; typed edges {typed}/{edges}")
    assert len(judgements) >= 10 and found >= len(judgements) // 2 and typed / edges >= 0.4


# the CLI -------------------------------------------------------------------------------------------------


def test_cli_options_reach_the_walk(corpus, monkeypatch, capsys):
    monkeypatch.setenv("RAGLOOM_COLLECTION_PREFIX", corpus.settings.collection_prefix)
    monkeypatch.setenv("RAGLOOM_GRAPH_NAMESPACE", corpus.settings.graph_namespace)
    assert main(["query", QUESTION, "--json", "-k", "5", "--strategy", "graph_rag", "--option", "abstain=false",
                 "--option", "max_hops=3", "--option", "relations=svo", "--option", "context_format=json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metadata"]["options"]["max_hops"] == 3 and out["metadata"]["options"]["relations"] == ["svo"]
    context = out["items"][0]
    assert {e["family"] for e in json.loads(context["text"])["edges"]} == {"svo"}
    assert main(["query", QUESTION, "--strategy", "graph_rag", "--option", "max_hops=0"]) != 0
    assert "max_hops" in capsys.readouterr().err


# the service and the playground --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(corpus: Corpus):
    key_file = corpus.root / "keys.json"
    key = KeyStore(key_file).create("acme", "", admin=False)[0]
    port = free_port()
    s = corpus.settings
    env = {**os.environ, "RAGLOOM_COLLECTION_PREFIX": s.collection_prefix, "RAGLOOM_GRAPH_NAMESPACE": s.graph_namespace,
           "RAGLOOM_CHUNKINGS": "recursive", "RAGLOOM_GRAPH_CHUNKINGS": "recursive",
           "RAGLOOM_SERVICE_KEYS_FILE": str(key_file), "RAGLOOM_ARTIFACTS_DIR": str(corpus.root / "artifacts"),
           "RAGLOOM_UPLOADS_DIR": str(corpus.root / "uploads"), "PYTHONUNBUFFERED": "1"}
    with ragloom_serve(env, port, corpus.root / "service.log", REPO_ROOT) as url:
        yield url, key


def _api_query(service, options: dict) -> httpx.Response:
    url, key = service
    return httpx.post(f"{url}/v1/query", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                      json={"query": QUESTION, "strategy": "graph_rag", "k": 5, "options": {**BASE, **options}})


def test_service_takes_the_traversal_options(service):
    response = _api_query(service, {"max_hops": 2, "relations": ["LEAD", "BUILD", "OWN"], "context_format": "json"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metadata"]["options"]["max_hops"] == 2
    edges = json.loads(body["items"][0]["text"])["edges"]
    assert edges and {e["type"] for e in edges} <= {"LEAD", "BUILD", "OWN"}
    refused = _api_query(service, {"context_format": "yaml"})
    assert refused.status_code in (400, 422) and "context_format" in refused.text


def test_playground_assets_are_the_named_files_only(service):
    url, _ = service
    assert httpx.get(f"{url}/playground-assets/cytoscape.min.js").status_code == 200
    for name in ("keys.json", "..%2F..%2Fkeys.json", "swagger-ui-bundle.js"):
        assert httpx.get(f"{url}/playground-assets/{name}").status_code == 404, name


def test_playground_graph_view_in_headless_chromium(service, corpus):
    from playwright.sync_api import sync_playwright

    if not docs.graph_view_ready(corpus.settings):
        pytest.fail("the graph view's files are not in the cache: run scripts/web-deps.sh")
    chromium = os.environ.get("RAGLOOM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is required (scripts/browser-deps.sh installs it)"
    url, key = service
    api = _api_query(service, {}).json()
    subgraph = api["items"][0]["metadata"]["graph"]
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(url + "/")
        page.fill("#key", key)
        page.fill("#query", QUESTION)
        page.select_option("#strategy", "graph_rag")
        page.fill("#options", json.dumps(BASE))
        page.click("button[type=submit]")
        page.wait_for_selector("#results")
        page.wait_for_function("window.ragloomGraph !== undefined")
        drawn = page.evaluate("({nodes: ragloomGraph.cy.nodes().length, edges: ragloomGraph.cy.edges().length,"
                              " separated: ragloomGraph.separated, zoom: ragloomGraph.cy.zoom()})")
        assert drawn["nodes"] == len(subgraph["nodes"]) and drawn["edges"] == len(subgraph["edges"])
        assert drawn["separated"] and drawn["zoom"] >= 0.85  # 12 px labels drawn at 10 px or more
        boxes = page.evaluate("ragloomGraph.labelled().map(e => { const b = ragloomGraph.labelBox(e); "
                              "return [e.id(), b.x1, b.y1, b.x2, b.y2]; })")
        assert len(boxes) >= len(subgraph["nodes"])  # every entity's label, and the typed edges'
        for i, (a, *ra) in enumerate(boxes):
            for b, *rb in boxes[i + 1:]:
                apart = ra[2] <= rb[0] or rb[2] <= ra[0] or ra[3] <= rb[1] or rb[3] <= ra[1]
                assert apart, f"labels of {a} and {b} overlap: {ra} {rb}"
        # click the entity mentioned by the most chunks that the view lists in full
        node = max((n for n in subgraph["nodes"] if n["chunk_count"] <= len(n["chunks"])),
                   key=lambda n: (n["chunk_count"], n["entity_id"]))
        position = page.evaluate("id => { const n = ragloomGraph.cy.getElementById(id); ragloomGraph.cy.center(n); "
                                 "const p = n.renderedPosition(); return [p.x, p.y]; }", node["entity_id"])
        box = page.locator("#graph-view").bounding_box()
        page.mouse.click(box["x"] + position[0], box["y"] + position[1])
        page.wait_for_selector("#entity-chunk-list")
        listed = set(page.locator("#entity-chunk-list .chunk-id").all_inner_texts())
        assert listed == _chunks_of(corpus, node["entity_id"]) and len(listed) == node["chunk_count"]
        # hits as Markdown: a heading of the chunk's text rendered as an element, query words marked
        assert page.locator("#results .text.markdown").count() == len(api["items"]) - 1
        assert page.locator("#results .text.markdown h2, #results .text.markdown h3").count() >= 1
        assert "harborsight" in [m.lower() for m in page.locator("#results mark").all_inner_texts()]
        assert all(r.startswith(url) for r in requested), [r for r in requested if not r.startswith(url)]  # no CDN
        page.screenshot(path=str(ARTIFACTS / "playground_graph_view.png"), full_page=True)
        browser.close()
