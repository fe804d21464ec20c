"""GET / and POST /: the playground, a page for people who would rather look than read.

Plain HTML forms and server-rendered SVG, no JavaScript at all: nothing third-party to vendor, and the API key
travels in the POST body (never in a URL or a log line) and is never written back into the page.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from ragloom.chunking import available_chunkers
from ragloom.errors import RagloomError
from ragloom.retrieval import available_strategies
from ragloom.retrieval.postprocess import is_graph_context
from ragloom.service.auth import authenticate
from ragloom.service.errors import public_error
from ragloom.service.models import QueryRequest
from ragloom.service.routers.query import citation, run_query
from ragloom.types import RetrievalResult, RetrievedItem

router = APIRouter(tags=["playground"], include_in_schema=False)
_EDGE = re.compile(r"^(?P<s>.+?) \((?P<st>[^()]*)\) -\[(?P<rel>[^\]]*)\]-> (?P<t>.+?) \((?P<tt>[^()]*)\)$")
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


def _page(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>ragloom playground"
                        f"</title><style>{_STYLE}</style></head><body><h1>ragloom playground</h1>{body}</body></html>",
                        status_code=status)


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
    """The graph context item's edges as an SVG: entities on a circle, seeds filled, relations as labelled lines."""
    edges = [m.groups() for line in item.text.splitlines() if (m := _EDGE.match(line.strip()))]
    names: dict[str, str] = {}
    for source, stype, _, target, ttype in edges:
        names.setdefault(source, stype)
        names.setdefault(target, ttype)
    for name in item.metadata.get("entities", []):
        names.setdefault(name, "")
    seeds = {s.lower() for s in item.metadata.get("seeds", [])}
    if not names:
        return ""
    cx, cy, r = width / 2, height / 2, min(width, height) / 2 - 60
    pos = {}
    for i, name in enumerate(names):
        angle = 2 * math.pi * i / len(names) - math.pi / 2
        pos[name] = (cx + r * math.cos(angle), cy + r * math.sin(angle)) if len(names) > 1 else (cx, cy)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="subgraph" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}"><title>Visited subgraph</title>']
    for source, _, rel, target, _ in edges:
        (x1, y1), (x2, y2) = pos[source], pos[target]
        parts.append(f'<line class="edge" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#8c959f"/>'
                     f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2:.1f}" font-size="10" fill="#57606a" '
                     f'text-anchor="middle">{html.escape(rel)}</text>')
    for name, kind in names.items():
        x, y = pos[name]
        fill = "#ffd8a8" if name.lower() in seeds else "#d0ebff"
        parts.append(f'<g class="node"><circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="{fill}" stroke="#1d232a"/>'
                     f'<text x="{x:.1f}" y="{y - 13:.1f}" font-size="12" text-anchor="middle">{html.escape(name)}'
                     f'{" (" + html.escape(kind) + ")" if kind else ""}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _results(result: RetrievalResult) -> str:
    meta = result.metadata
    timings = meta.get("timings_ms", {})
    head = (f'<p class="meta" id="summary">strategy {html.escape(str(meta.get("strategy")))} · lanes '
            f'{html.escape(", ".join(meta.get("lanes_run", [])))} · {timings.get("total", 0):.0f} ms'
            + (f' · fallbacks: {html.escape("; ".join(meta["fallbacks"]))}' if meta.get("fallbacks") else "")
            + (f' · abstained: {html.escape(str(meta.get("abstain_reason")))}' if meta.get("abstained") else "")
            + "</p>")
    graph = "".join(f"<h2>Visited subgraph</h2>{subgraph_svg(i)}" for i in result.items if is_graph_context(i))
    rows = []
    for item in result.items:
        if is_graph_context(item):
            continue
        rows.append(f'<div class="item"><div><b>{item.rank}.</b> [{item.score:.3f}] '
                    f'<span class="cite">{html.escape(citation(item))}</span></div>'
                    f'<div class="text">{highlight(item.text, result.query)}</div></div>')
    listing = "".join(rows) or "<p>No results.</p>"
    return f'<section id="results">{head}{graph}<h2>Results</h2>{listing}</section>'


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
    return _page(form + _results(result))
