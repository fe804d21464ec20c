"""Chunking variants side by side on an evaluation dataset: every variant is registered as its own chunking and
all of them run through one `ragloom eval` evaluation (one namespace, the shared embedding cache), so a variant
whose chunks did not change costs its queries only.

    python benchmarks/chunking_sweep.py --dataset ../shared/data/obliqa --namespace ChunkSweep \\
        recursive headered 'h256=headered:{"chunk_size": 256}' gold=oracle \\
        'prev64=context:{"side": "prev", "cap": 64}'

A variant is ``name=base:{json options}`` (``base`` alone: the registered chunking with its defaults), optionally
followed by ``@{json retrieval options}`` (e.g. ``recursive@{"neighbour_weight": 0.25}``): the same chunks
searched with those options. Variants with the same retrieval options run in one evaluation, each distinct set of
options in its own (same namespace, so no chunk is stored twice); every row is paired with the first variant, the
reference, on the same queries (95% bootstrap CI). Two probes that are no product chunkings:

- ``oracle``: the dataset's own gold units (``passages.jsonl``) as chunks, one per passage: what chunks that end
  exactly where the judged units end score under the same retrieval (a passage longer than the model reads is
  embedded truncated).
- ``context``: headered chunks (options of ``headered`` allowed besides ``side`` and ``cap``) whose *embedded*
  text also carries up to ``cap`` tokens of the text before (``side=prev``), after (``next``) or both sides of
  the chunk within its section, up to the model's input limit; the returned text, and so its cost in a token
  budget, is the chunk alone.

Prints one row per variant (chunks, R@10 and tokrecall@512/1024/2048 at passage level, or R@10 and nDCG@10 at
document level); ``--json`` writes them. ``--drop`` removes the namespace's collections afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragloom.chunking.base import _REGISTRY, Chunker, HeadingIndex, Span, register_chunker, trim  # noqa: E402
from ragloom.types import Chunk, Document  # noqa: E402

PASSAGE_METRICS = ("recall@10", "tokrecall@512", "tokrecall@1024", "tokrecall@2048")
DOCUMENT_METRICS = ("recall@10", "ndcg@10")
_REGISTERED: dict[str, str] = {}  # name -> the spec it was registered from


def register_variant(name: str, base: str, options: dict[str, Any]) -> None:
    """Chunking ``name``: the registered chunking ``base`` with ``options`` as its defaults."""
    cls = _REGISTRY.get(base)
    if cls is None:
        raise SystemExit(f"unknown chunking {base!r}")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls.__init__(self, *args, **{**options, **kwargs})

    register_chunker(name)(type(f"Sweep_{name}", (cls,), {"__init__": __init__}))


def register_oracle(name: str, passages_file: Path) -> None:
    """Chunking ``name``: one chunk per gold passage of ``passages_file`` (``doc_id``, ``start``, ``end``)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for line in passages_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            spans.setdefault(str(row["doc_id"]), []).append((int(row["start"]), int(row["end"])))

    class Oracle(Chunker):
        def split(self, document: Document) -> list[Span]:
            out = []
            for start, end in sorted(spans.get(document.document_id, [])):
                a, b = trim(document.text, start, end)
                if a < b:
                    out.append(Span(a, b, truncate_embed=True))
            return out

    register_chunker(name)(type(f"Sweep_{name}", (Oracle,), {}))


def register_context(name: str, options: dict[str, Any]) -> None:
    """Chunking ``name``: headered chunks whose embedded text adds neighbouring text of the same section."""
    side, cap = options.pop("side", "prev"), int(options.pop("cap", 64))
    if side not in ("prev", "next", "both"):
        raise SystemExit(f"context: side={side!r}; one of prev, next, both")
    headered = _REGISTRY.get("headered")

    class Context(headered):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            headered.__init__(self, *args, **{**options, **kwargs})

        def chunk(self, document: Document) -> list[Chunk]:
            chunks = headered.chunk(self, document)
            sections = HeadingIndex(document).sections()
            return [dataclasses.replace(c, embed_text=self._with_context(document.text, sections, c)) for c in chunks]

        def _with_context(self, text: str, sections: list[tuple[int, int]], c: Chunk) -> str:
            low, high = next(((a, b) for a, b in sections if a <= c.start < b), (0, len(text)))
            room = self.counter.max_tokens - c.token_count
            want_before = min(cap, room if side == "prev" else room // 2) if side != "next" else 0
            before = _tokens_at_end(self, text[max(low, c.start - 8 * want_before):c.start], want_before)
            want_after = min(cap, room - _inner(self, before)) if side != "prev" else 0
            after = _tokens_at_start(self, text[c.end:min(high, c.end + 8 * max(want_after, 0))], want_after)
            while self.counter.count(before + c.text + after) > self.counter.max_tokens and (before or after):
                before, after = before[len(before) // 4:], after[: 3 * len(after) // 4]
            return before + c.text + after

    register_chunker(name)(type(f"Sweep_{name}", (Context,), {}))


def _inner(chunker: Chunker, text: str) -> int:
    return chunker.counter.count(text) - chunker.counter.special_tokens if text else 0


def _tokens_at_end(chunker: Chunker, text: str, n: int) -> str:
    if n <= 0 or not text.strip():
        return ""
    offsets = chunker.counter.tokenizer.encode(text, add_special_tokens=False).offsets
    return text if len(offsets) <= n else text[offsets[-n][0]:]


def _tokens_at_start(chunker: Chunker, text: str, n: int) -> str:
    if n <= 0 or not text.strip():
        return ""
    offsets = chunker.counter.tokenizer.encode(text, add_special_tokens=False).offsets
    return text if len(offsets) <= n else text[: offsets[n - 1][1]]


def split_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """(the chunking part, the retrieval options) of ``chunking[@{json}]``."""
    chunking, at, raw = spec.partition("@")
    options = json.loads(raw) if at else {}
    if not isinstance(options, dict):
        raise SystemExit(f"{spec!r}: the retrieval options after '@' must be a JSON object")
    return chunking, options


def register(spec: str, dataset: Path) -> str:
    """Registers the variant ``spec`` (``name=base:{json}`` or a registered name) and returns its name; a name
    registered before (the same chunks under other retrieval options) is registered once."""
    name, _, rest = spec.partition("=")
    if _REGISTERED.get(name) == spec:
        return name
    base, _, raw = (rest or name).partition(":")
    options = json.loads(raw) if raw else {}
    if base == "oracle":
        register_oracle(name, dataset / "passages.jsonl")
    elif base == "context":
        register_context(name, options)
    elif name != base or options:
        register_variant(name, base, options)
    _REGISTERED[name] = spec
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", help="name=base:{json}; the first is the reference")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--namespace", default="ChunkSweep")
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--corpus-limit", type=int, default=None)
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--also", type=int, default=0,
                        help="also print each row's paired difference from this variant (1 = the first)")
    parser.add_argument("--json", default="", help="write the rows here")
    parser.add_argument("--scores", default="", help="write every row's per-query scores here (JSON), to pair "
                        "rows of different runs")
    parser.add_argument("--drop", action="store_true", help="remove the namespace's collections afterwards")
    args = parser.parse_args(argv)

    from ragloom.evaluation.runner import drop_namespace, evaluate
    from ragloom.settings import Settings

    dataset = Path(args.dataset)
    variants = []  # (chunking name, retrieval options)
    for spec in args.variants:
        chunking, options = split_spec(spec)
        variants.append((register(chunking, dataset), options))
    groups: dict[str, list[str]] = {}
    for name, options in variants:
        groups.setdefault(json.dumps(options, sort_keys=True), []).append(name)
    settings = Settings.from_env()
    systems, ingest, report = [], {}, None
    for raw, names in groups.items():
        report = evaluate(str(dataset), [args.strategy], list(dict.fromkeys(names)), settings,
                          namespace=args.namespace, max_queries=args.max_queries, corpus_limit=args.corpus_limit,
                          depth=args.depth, baselines=False, query_options=raw,
                          log=lambda m: print(m, file=sys.stderr, flush=True))
        for system in report.systems:
            system.retrieval = args.strategy + ("" if raw == "{}" else "@" + raw)
        systems += report.systems
        ingest.update(report.ingest)
    assert report is not None
    report.ingest = ingest
    report.systems = sorted(systems, key=lambda s: [(n, json.dumps(o, sort_keys=True)) for n, o in variants].index(
        (s.chunking, s.retrieval.partition("@")[2] or "{}")))
    level = "passage" if "passage" in report.levels else "document"
    metrics = PASSAGE_METRICS if level == "passage" else DOCUMENT_METRICS
    reference = report.systems[0].name
    rows = []
    print(f"{dataset.name}: {len(report.query_ids[level])} queries, {level} level, reference {reference}")
    for system in report.systems:
        row: dict[str, Any] = {"chunking": system.chunking, "options": system.retrieval.partition("@")[2],
                               "chunks": report.ingest[system.chunking]["chunks"]}
        cells = []
        for metric in metrics:
            mean = report.estimate(system, level, metric).mean
            row[metric] = round(mean, 4)
            cell = f"{metric} {mean:.3f}"
            if system.name != reference:
                d = report.compare(system.name, reference, level, metric)
                row[f"{metric} diff"] = [round(d.mean, 4), round(d.low, 4), round(d.high, 4)]
                cell += f" ({d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}])"
            also = report.systems[args.also - 1].name if args.also else None
            if also and system.name != also:
                d = report.compare(system.name, also, level, metric)
                row[f"{metric} diff {args.also}"] = [round(d.mean, 4), round(d.low, 4), round(d.high, 4)]
                cell += f" (vs {args.also}: {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}])"
            cells.append(cell)
        rows.append(row)
        label = system.chunking + ("@" + row["options"] if row["options"] else "")
        print(f"{label:>12} {row['chunks']:>6} chunks | " + " | ".join(cells), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if args.scores:
        per_query = {"query_ids": report.query_ids[level], "systems": {
            s.chunking + ("@" + s.retrieval.partition("@")[2] if "@" in s.retrieval else ""):
                {m: [float(x) for x in s.scores[level][m]] for m in metrics} for s in report.systems}}
        Path(args.scores).write_text(json.dumps(per_query), encoding="utf-8")
    if args.drop:
        print("dropped", ", ".join(drop_namespace(settings, report.dataset, args.namespace)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
