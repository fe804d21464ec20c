"""GET / and POST /: the playground, a page for people who would rather look than read.

A plain HTML form: the API key travels in the POST body (never in a URL or a log line) and is never written back
into the page. graph_rag's context item is drawn as a graph (cytoscape: entity labels kept apart, edge types by
colour and label, a click on an entity lists the chunks that mention it) and hits are rendered as Markdown
(marked, then DOMPurify), from files fetched at setup time (ragloom.service.docs) and served under
``/playground-assets``: no CDN. Without those files the page draws a static SVG and shows hits as text.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse
from pydantic import ValidationError

from ragloom.chunking import available_chunkers
from ragloom.errors import RagloomError
from ragloom.retrieval import available_strategies
from ragloom.retrieval.postprocess import is_graph_context
from ragloom.service import docs
from ragloom.service.auth import authenticate
from ragloom.service.errors import public_error
from ragloom.service.models import QueryRequest
from ragloom.service.routers.query import citation, run_query
from ragloom.types import RetrievalResult, RetrievedItem

router = APIRouter(tags=["playground"], include_in_schema=False)
ASSETS_ROUTE = "/playground-assets"
_WORD = re.compile(r"\w{3,}", re.UNICODE)
_STOP = {"the", "and", "for", "are", "was", "what", "which", "who", "how", "why", "with", "that", "this", "from",
         "does", "did", "into", "when", "where"}

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:62rem;margin:1.5rem auto;padding:0 1rem;color:#1d232a}
form{display:grid;grid-template-columns:9rem 1fr;gap:.5rem 1rem;align-items:center;margin-bottom:1.5rem}
input,select,textarea{font:inherit;padding:.3rem}textarea{min-height:3rem}
button{grid-column:2;justify-self:start;padding:.4rem 1.2rem;font:inherit}
.item{border-top:1px solid #d0d7de;padding:.6rem 0}.cite{color:#57606a;font-size:.85rem}
mark{background:#fff3a3}.meta{font-size:.85rem;color:#57606a}.error{color:#b42318;font-weight:600}
svg{border:1px solid #d0d7de;background:#fbfcfd}
#graph-view{height:560px;border:1px solid #d0d7de;background:#fbfcfd}
.legend{font-size:.85rem;color:#57606a}.legend span{margin-right:1.2rem}
.swatch{display:inline-block;width:1.6rem;height:0;border-top:2px solid #2f6f4f;vertical-align:middle;
margin-right:.3rem}
.swatch.co{border-top:1px dashed #8c959f}.dot{display:inline-block;width:.7rem;height:.7rem;border-radius:50%;
background:#74a9cf;margin-right:.3rem}.dot.seed{background:#f08c00}
#entity-chunks{font-size:.9rem;margin:.5rem 0 1rem}.text.markdown p{margin:.3rem 0}
.text.markdown table{border-collapse:collapse}
.text.markdown td,.text.markdown th{border:1px solid #d0d7de;padding:.2rem .4rem}
"""

# The page's own script: hits as Markdown, then the graph. Text from the index only ever reaches the page through
# DOMPurify (Markdown) or textContent (names, chunk ids).
_SCRIPT = """
(function () {
  'use strict';
  const READABLE_ZOOM = 0.85;  // labels of 12 px drawn at 10 px or more
  const read = (id) => { const el = document.getElementById(id); return el ? JSON.parse(el.textContent) : null; };
  const hits = read('hits-data');
  const graph = read('graph-data');

  function markWords(root, words) {
    if (!words.length) return;
    const pattern = new RegExp(words.map((w) => w.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&')).join('|'), 'gi');
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    for (const node of texts) {
      const text = node.nodeValue;
      pattern.lastIndex = 0;
      if (!pattern.test(text)) continue;
      pattern.lastIndex = 0;
      const out = document.createDocumentFragment();
      let last = 0;
      for (const m of text.matchAll(pattern)) {
        out.append(text.slice(last, m.index));
        const mark = document.createElement('mark');
        mark.textContent = m[0];
        out.append(mark);
        last = m.index + m[0].length;
      }
      out.append(text.slice(last));
      node.replaceWith(out);
    }
  }

  if (hits && window.marked && window.DOMPurify) {
    for (const hit of hits.hits) {
      const box = document.querySelector('#hit-' + hit.rank + ' .text');
      if (!box) continue;
      box.innerHTML = DOMPurify.sanitize(marked.parse(hit.text));
      box.classList.add('markdown');
      markWords(box, hits.words);
    }
  }
  if (!graph || !graph.nodes || !window.cytoscape) return;

  const byId = Object.fromEntries(graph.nodes.map((n) => [n.entity_id, n]));
  const hitRank = Object.fromEntries((hits ? hits.hits : []).map((h) => [h.chunk_id, h.rank]));
  const n = graph.nodes.length;
  const elements = graph.nodes.map((node, i) => ({
    group: 'nodes',
    data: {id: node.entity_id, label: node.name + ' · ' + node.type, seed: !!node.seed},
    position: {x: 320 * Math.cos(2 * Math.PI * i / n), y: 240 * Math.sin(2 * Math.PI * i / n)},
  }));
  // parallel relations share one label ("BUILD, OWN"): two labels on one pair of nodes could never be parted
  const pairLabel = {};
  graph.edges.forEach((e) => {
    const key = [e.source, e.target].sort().join('|');
    if (e.family === 'svo') (pairLabel[key] = pairLabel[key] || []).push(e.type);
  });
  const labelled = new Set();
  graph.edges.forEach((e, i) => {
    const key = [e.source, e.target].sort().join('|');
    let label = '';
    if (e.family === 'svo' && !labelled.has(key)) {
      labelled.add(key);
      label = [...new Set(pairLabel[key])].join(', ');
    }
    elements.push({group: 'edges', data: {id: 'edge' + i, source: e.source, target: e.target, type: e.type,
                                          family: e.family, chunk: e.chunk_id, label: label}});
  });
  const cy = cytoscape({
    container: document.getElementById('graph-view'), elements: elements, layout: {name: 'preset'},
    minZoom: 0.2, maxZoom: 3,
    style: [
      {selector: 'node', style: {'label': 'data(label)', 'font-size': 12, 'color': '#1d232a', 'text-valign': 'top',
        'text-margin-y': -3, 'background-color': '#74a9cf', 'width': 14, 'height': 14,
        'text-background-color': '#ffffff', 'text-background-opacity': 0.9, 'text-background-padding': 2}},
      {selector: 'node[?seed]', style: {'background-color': '#f08c00', 'width': 18, 'height': 18}},
      {selector: 'node:selected', style: {'border-width': 3, 'border-color': '#1d232a'}},
      {selector: 'edge', style: {'width': 2, 'line-color': '#2f6f4f', 'curve-style': 'bezier',
        'target-arrow-shape': 'triangle', 'target-arrow-color': '#2f6f4f', 'label': 'data(label)', 'font-size': 10,
        'color': '#2f6f4f', 'text-background-color': '#ffffff', 'text-background-opacity': 0.9,
        'text-background-padding': 1}},
      {selector: 'edge[family = "co_occurs"]', style: {'width': 1, 'line-color': '#8c959f', 'line-style': 'dashed',
        'target-arrow-shape': 'none'}},
    ],
  });
  cy.layout({name: 'cose', animate: false, randomize: false, nodeDimensionsIncludeLabels: true,
             idealEdgeLength: () => 70, nodeRepulsion: () => 12000, gravity: 2, componentSpacing: 40,
             numIter: 1500}).run();

  const labelBox = (ele) => ele.boundingBox({includeNodes: false, includeEdges: false, includeLabels: true,
                                             includeOverlays: false, includeUnderlays: false});
  const labelled_elements = () => cy.elements().filter((ele) => !!ele.data('label'));
  const owners = (ele) => ele.isNode() ? [ele] : [ele.source(), ele.target()];
  const hits2 = (a, b) => a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;

  // push overlapping labels apart along the axis where they overlap least, moving the nodes that carry them
  function separate(rounds) {
    for (let round = 0; round < rounds; round++) {
      const items = labelled_elements().map((ele) => ({ele: ele, box: labelBox(ele)}));
      let moved = false;
      for (let i = 0; i < items.length; i++) {
        for (let j = i + 1; j < items.length; j++) {
          const a = items[i].box, b = items[j].box;
          if (!hits2(a, b)) continue;
          const dx = Math.min(a.x2 - b.x1, b.x2 - a.x1), dy = Math.min(a.y2 - b.y1, b.y2 - a.y1);
          const ax = (a.x1 + a.x2) / 2, bx = (b.x1 + b.x2) / 2, ay = (a.y1 + a.y2) / 2, by = (b.y1 + b.y2) / 2;
          let vx = 0, vy = 0;
          if (dx < dy) vx = (ax <= bx ? -1 : 1) * (dx / 2 + 3); else vy = (ay <= by ? -1 : 1) * (dy / 2 + 3);
          const oa = owners(items[i].ele), ob = owners(items[j].ele);
          const onlyA = oa.filter((x) => !ob.includes(x)), onlyB = ob.filter((x) => !oa.includes(x));
          if (!onlyA.length && !onlyB.length) continue;
          const ka = onlyB.length ? 1 : 2, kb = onlyA.length ? 1 : 2;  // one side fixed: the other moves it all
          onlyA.forEach((x) => x.shift({x: vx * ka, y: vy * ka}));
          onlyB.forEach((x) => x.shift({x: -vx * kb, y: -vy * kb}));
          moved = true;
        }
      }
      if (!moved) return true;
    }
    return false;
  }
  const separated = separate(500);
  cy.fit(undefined, 24);
  if (cy.zoom() < READABLE_ZOOM) {  // too many entities to show whole at a readable size: start at the seeds
    cy.zoom(READABLE_ZOOM);
    cy.center(cy.nodes('[?seed]').length ? cy.nodes('[?seed]') : cy.nodes());
  }

  const panel = document.getElementById('entity-chunks');
  cy.on('tap', 'node', (event) => {
    const node = byId[event.target.id()];
    panel.replaceChildren();
    const title = document.createElement('p');
    title.textContent = node.name + ' (' + node.type + ') is mentioned in ' + node.chunk_count + ' chunk' +
                        (node.chunk_count === 1 ? '' : 's') + ' you may read:';
    const list = document.createElement('ul');
    list.id = 'entity-chunk-list';
    list.dataset.entity = node.entity_id;
    for (const chunk of node.chunks) {
      const li = document.createElement('li');
      const code = document.createElement('code');
      code.className = 'chunk-id';
      code.textContent = chunk;
      li.append(code);
      if (chunk in hitRank) {
        const a = document.createElement('a');
        a.href = '#hit-' + hitRank[chunk];
        a.textContent = ' (result ' + hitRank[chunk] + ')';
        li.append(a);
      }
      list.append(li);
    }
    panel.append(title, list);
    if (node.chunk_count > node.chunks.length) {
      const more = document.createElement('p');
      more.textContent = '… and ' + (node.chunk_count - node.chunks.length) + ' more';
      panel.append(more);
    }
  });
  window.ragloomGraph = {cy: cy, separated: separated, labelBox: labelBox, labelled: labelled_elements};
})();
"""


def _options(values: list[str], chosen: str) -> str:
    return "".join(f'<option value="{html.escape(v)}"{" selected" if v == chosen else ""}>'
                   f'{html.escape(v) or "(default)"}</option>' for v in values)


def _form(fields: dict[str, str]) -> str:
    def value(name: str, default: str = "") -> str:
        return html.escape(fields.get(name, default))

    strategies = _options(available_strategies(), fields.get("strategy", "hybrid"))
    chunkings = _options(["", *available_chunkers()], fields.get("chunking", ""))
    checked = " checked" if fields.get("exclude_dynamic") else ""
    return f"""<form method="post" action="/">
<label for="key">API key</label><input id="key" name="key" type="password" autocomplete="off" required>
<label for="query">Query</label><input id="query" name="query" value="{value('query')}" required>
<label for="strategy">Strategy</label><select id="strategy" name="strategy">{strategies}</select>
<label for="k">k</label><input id="k" name="k" type="number" min="1" max="50" value="{value('k', '5')}">
<label for="chunking">Chunking</label><select id="chunking" name="chunking">{chunkings}</select>
<label for="scope">Scope</label><input id="scope" name="scope" value="{value('scope')}" placeholder="the key's own">
<label for="options">Options (JSON)</label><textarea id="options" name="options"
 placeholder='{{"alpha": 0.5}}'>{value('options')}</textarea>
<label for="exclude_dynamic">Exclude dynamic</label>
<input id="exclude_dynamic" name="exclude_dynamic" type="checkbox" value="1"{checked}>
<button type="submit">Search</button></form>"""


def _page(body: str, status: int = 200, scripts: bool = False) -> HTMLResponse:
    tail = "".join(f'<script src="{ASSETS_ROUTE}/{name}"></script>' for name in _assets()) + \
        f"<script>{_SCRIPT}</script>" if scripts else ""
    return HTMLResponse(f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>ragloom playground"
                        f"</title><style>{_STYLE}</style></head><body><h1>ragloom playground</h1>{body}{tail}</body>"
                        f"</html>", status_code=status)


def highlight(text: str, query: str) -> str:
    """``text`` escaped, with the query's words (3+ letters, not stop words) marked, case-insensitively."""
    words = sorted({w.lower() for w in _WORD.findall(query)} - _STOP, key=len, reverse=True)
    if not words:
        return html.escape(text)
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        out.append(f"<mark>{html.escape(m.group(0))}</mark>")
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def subgraph_svg(item: RetrievedItem, width: int = 640, height: int = 420) -> str:
    """The context item's graph (``metadata["graph"]``) as a static SVG: entities on a circle, seeds filled,
    relations as labelled lines (the page without the graph view's files)."""
    graph = item.metadata.get("graph") or {}
    nodes = {n["entity_id"]: n for n in graph.get("nodes", [])}
    edges = [e for e in graph.get("edges", []) if e["source"] in nodes and e["target"] in nodes]
    if not nodes:
        return ""
    cx, cy, r = width / 2, height / 2, min(width, height) / 2 - 60
    pos = {}
    for i, entity in enumerate(nodes):
        angle = 2 * math.pi * i / len(nodes) - math.pi / 2
        pos[entity] = (cx + r * math.cos(angle), cy + r * math.sin(angle)) if len(nodes) > 1 else (cx, cy)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="subgraph" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}"><title>Visited subgraph</title>']
    for edge in edges:
        (x1, y1), (x2, y2) = pos[edge["source"]], pos[edge["target"]]
        parts.append(f'<line class="edge" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#8c959f"/>'
                     f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2:.1f}" font-size="10" fill="#57606a" '
                     f'text-anchor="middle">{html.escape(edge["type"])}</text>')
    for entity, node in nodes.items():
        x, y = pos[entity]
        fill = "#ffd8a8" if node.get("seed") else "#d0ebff"
        kind = node.get("type") or ""
        parts.append(f'<g class="node"><circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="{fill}" stroke="#1d232a"/>'
                     f'<text x="{x:.1f}" y="{y - 13:.1f}" font-size="12" text-anchor="middle">'
                     f'{html.escape(node["name"])}{" (" + html.escape(kind) + ")" if kind else ""}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _json_script(element_id: str, value: Any) -> str:
    """``value`` as JSON inside a script element that no text in it can close or escape."""
    text = json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
    text = text.replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _graph_view(item: RetrievedItem) -> str:
    """The drawing area, its legend, the chunk list a click fills, and the relations as text."""
    graph = item.metadata.get("graph") or {}
    return ('<h2>Visited subgraph</h2><div id="graph-view" role="img" aria-label="Graph of the relations that link '
            'the query\'s entities to the results"></div>'
            '<p class="legend"><span><i class="dot seed"></i>query entity</span><span><i class="dot"></i>entity</span>'
            '<span><i class="swatch"></i>typed relation (subject-verb-object), labelled</span>'
            '<span><i class="swatch co"></i>same sentence (co-occurrence)</span></p>'
            '<div id="entity-chunks"><p>Click an entity to list the chunks that mention it.</p></div>'
            f'<details><summary>The context item as text</summary><pre id="graph-text">{html.escape(item.text)}</pre>'
            f'</details>{_json_script("graph-data", graph)}')


def _query_words(query: str) -> list[str]:
    return sorted({w.lower() for w in _WORD.findall(query)} - _STOP, key=len, reverse=True)


def _results(result: RetrievalResult, graph_view: bool) -> str:
    meta = result.metadata
    head = (f'<p class="meta" id="summary">strategy {html.escape(meta.strategy)} · lanes '
            f'{html.escape(", ".join(meta.lanes_run))} · {meta.timings_ms.get("total", 0):.0f} ms'
            + (f' · fallbacks: {html.escape("; ".join(meta.fallbacks))}' if meta.fallbacks else "")
            + (f' · abstained: {html.escape(meta.abstain_reason)}' if meta.abstained else "")
            + "</p>")
    contexts = [i for i in result.items if is_graph_context(i)]
    if graph_view:
        graph = "".join(_graph_view(i) for i in contexts[:1])
    else:
        graph = "".join(f"<h2>Visited subgraph</h2>{subgraph_svg(i)}" for i in contexts)
    rows, hits = [], []
    for item in result.items:
        if is_graph_context(item):
            continue
        hits.append({"chunk_id": item.chunk_id, "rank": item.rank, "text": item.text})
        rows.append(f'<div class="item" id="hit-{item.rank}" data-chunk="{html.escape(item.chunk_id)}"><div>'
                    f'<b>{item.rank}.</b> [{item.score:.3f}] <span class="cite">{html.escape(citation(item))}</span>'
                    f'</div><div class="text">{highlight(item.text, result.query)}</div></div>')
    listing = "".join(rows) or "<p>No results.</p>"
    data = _json_script("hits-data", {"hits": hits, "words": _query_words(result.query)}) if graph_view else ""
    return f'<section id="results">{head}{graph}<h2>Results</h2>{listing}{data}</section>'


def _assets() -> dict[str, docs.Bundle]:
    return {name: bundle for bundle in docs.GRAPH_VIEW for name in bundle.names}


@router.get(ASSETS_ROUTE + "/{name}")
async def asset(name: str, request: Request) -> FileResponse:
    """The graph view's browser files, from the cache (only the files the bundles name)."""
    bundle = _assets().get(name)
    path = docs.assets_dir(request.app.state.settings, bundle) / name if bundle else None
    if path is None or not path.is_file():
        raise HTTPException(404, "no such asset")
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})


@router.get("/", response_class=HTMLResponse)
async def page() -> HTMLResponse:
    return _page(_form({}))


@router.post("/", response_class=HTMLResponse)
async def search(request: Request) -> HTMLResponse:
    raw = await request.body()
    fields = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
    key = fields.pop("key", "")
    form = _form(fields)
    try:
        who = authenticate(request, key)
        options: dict[str, Any] = json.loads(fields["options"]) if fields.get("options", "").strip() else {}
        body = QueryRequest(query=fields.get("query", ""), strategy=fields.get("strategy", "hybrid"),
                            k=int(fields.get("k") or 5), chunking=fields.get("chunking") or None,
                            scope=fields.get("scope") or None, exclude_dynamic=bool(fields.get("exclude_dynamic")),
                            options=options if isinstance(options, dict) else {})
        result = await run_query(request, who, body)
    except HTTPException as e:
        return _page(form + f'<p class="error">{html.escape(str(e.detail))}</p>', e.status_code)
    except (ValueError, ValidationError) as e:  # bad k, bad JSON options, bad fields
        return _page(form + f'<p class="error">{html.escape(str(e).splitlines()[0])}</p>', 400)
    except RagloomError as e:
        status, body = public_error(e, "POST /")
        return _page(form + f'<p class="error">{html.escape(body["detail"])}</p>', status)
    graph_view = docs.graph_view_ready(request.app.state.settings)
    return _page(form + _results(result, graph_view), scripts=graph_view)
