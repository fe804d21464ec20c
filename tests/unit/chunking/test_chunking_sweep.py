"""benchmarks/chunking_sweep.py's variants: options become defaults, the oracle chunks are the gold passages, the
context probe changes only what is embedded."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path

from ragloom.chunking import get_chunker
from ragloom.parsing.markdown import parse_headings
from ragloom.types import Document

_PATH = Path(__file__).resolve().parents[3] / "benchmarks" / "chunking_sweep.py"
_spec = importlib.util.spec_from_file_location("_ragloom_chunking_sweep", _PATH)
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)

TEXT = ("# Rules\n\n## 1 General\n\n"
        + "\n\n".join(f"1.{i} A firm must keep records of its {word} for six years after the end of each year."
                      for i, word in enumerate(["trades", "clients", "complaints", "staff", "audits"], 1))
        + "\n\n## 2 Fees\n\n2.1 Every applicant pays the fee set out in the schedule before its application is"
        " considered.\n\n2.2 A fee once paid is not refunded.")


def document() -> Document:
    return Document(document_id="d1", title="Rules", text=TEXT, source_path="d1.md", format="markdown",
                    content_hash="h", headings=parse_headings(TEXT))


def unique(prefix: str) -> str:  # the chunker registry takes a name once per process
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_variant_takes_its_options_as_defaults() -> None:
    name = sweep.register(f"{unique('small')}=headered:{json.dumps({'chunk_size': 32, 'min_tokens': 0})}", Path("."))
    spans = [(c.start, c.end) for c in get_chunker(name).chunk(document())]
    assert spans == [(c.start, c.end) for c in get_chunker("headered", chunk_size=32, min_tokens=0).chunk(document())]
    assert spans != [(c.start, c.end) for c in get_chunker("headered").chunk(document())]


def test_oracle_chunks_are_the_gold_passages(tmp_path: Path) -> None:
    wanted = [(TEXT.index("1.2 "), TEXT.index("1.3 ")), (TEXT.index("2.1 "), len(TEXT))]
    rows = [{"_id": f"p{i}", "doc_id": "d1", "start": a, "end": b} for i, (a, b) in enumerate(wanted)]
    rows.append({"_id": "other", "doc_id": "d2", "start": 0, "end": 5})
    (tmp_path / "passages.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    name = sweep.register(f"{unique('gold')}=oracle", tmp_path)
    chunks = get_chunker(name).chunk(document())
    assert [(c.start, c.end) for c in chunks] == [(wanted[0][0], wanted[0][1] - 2), wanted[1]]  # trimmed
    assert chunks[0].text == TEXT[wanted[0][0]:wanted[0][1]].strip()


def test_context_probe_embeds_the_text_before_within_the_section() -> None:
    name = sweep.register(f"{unique('prev')}=context:{json.dumps({'side': 'prev', 'cap': 8, 'min_tokens': 0})}",
                          Path("."))
    plain = get_chunker("headered", min_tokens=0).chunk(document())
    probed = get_chunker(name).chunk(document())
    assert [(c.start, c.end, c.text) for c in probed] == [(c.start, c.end, c.text) for c in plain]
    second = next(c for c in probed if c.text.startswith("1.2 "))
    assert second.embed_text.endswith(second.text) and second.embed_text != second.text
    before = second.embed_text[: -len(second.text)]
    assert TEXT[: second.start].endswith(before) and "1.1 " not in before  # the tail of 1.1, at most 8 tokens
    assert 0 < len(get_chunker(name).counter.tokenizer.encode(before, add_special_tokens=False).ids) <= 8
    first_of_fees = next(c for c in probed if "2.1 " in c.text)
    assert first_of_fees.embed_text == first_of_fees.text  # nothing from the section before


def test_retrieval_options_after_at_reuse_the_registered_chunks() -> None:
    spec = f"{unique('h')}=headered:{json.dumps({'chunk_size': 32})}"
    chunking, options = sweep.split_spec(spec + '@{"neighbour_weight": 0.5}')
    assert chunking == spec and options == {"neighbour_weight": 0.5}
    assert sweep.split_spec("recursive") == ("recursive", {})
    name = sweep.register(chunking, Path("."))
    assert sweep.register(sweep.split_spec(spec)[0], Path(".")) == name  # the same chunks: registered once
