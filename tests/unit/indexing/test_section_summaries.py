"""RAPTOR-lite's extractive summaries: deterministic, within the token budget, re-built only for changed
sections. The encoder is a real (tiny) deterministic one: hashed bag of words."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ragloom.errors import ConfigError
from ragloom.indexing.summaries import build_summaries, extractive_summary, group_sections, word_tokens
from ragloom.types import Chunk


class BagOfWords:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), 64))
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, int(hashlib.md5(word.strip(".,").encode()).hexdigest(), 16) % 64] += 1
        return out


TEXT = ("Buoys measure tides in the harbour. The harbour buoys send tide readings every minute. "
        "Lunch is served at noon. Tide readings from buoys plan dredging in the harbour. Parking is free.")


def _chunk(doc, pos, text, heading=()):
    return Chunk(chunk_id=f"{doc}-{pos}", document_id=doc, strategy="recursive", text=text, start=0, end=len(text),
                 token_count=len(text.split()), position=pos, heading_path=list(heading))


def test_summary_is_deterministic_central_and_within_budget():
    first = extractive_summary(TEXT, BagOfWords(), budget_tokens=20)
    assert first == extractive_summary(TEXT, BagOfWords(), budget_tokens=20)
    summary, tokens = first
    assert 0 < tokens <= 20 and word_tokens(summary) == tokens
    assert "Lunch" not in summary and "Parking" not in summary and "buoys" in summary.lower()
    for budget in (1, 5, 9, 40):
        assert extractive_summary(TEXT, BagOfWords(), budget)[1] <= budget
    with pytest.raises(ConfigError):
        extractive_summary(TEXT, BagOfWords(), 0)


def test_sections_by_heading_else_windows():
    chunks = [_chunk("a", 0, "x.", ("Intro",)), _chunk("a", 1, "y.", ("Intro",)), _chunk("a", 2, "z.", ("Methods",)),
              *(_chunk("b", i, f"w{i}.") for i in range(5))]
    keys = {s.key: s.chunk_ids for s in group_sections(chunks, window=2)}
    assert keys["a#Intro"] == ("a-0", "a-1") and keys["a#Methods"] == ("a-2",)
    assert [keys[f"b@{i}"] for i in range(3)] == [("b-0", "b-1"), ("b-2", "b-3"), ("b-4",)]


def test_only_changed_sections_are_rebuilt():
    chunks = [_chunk("a", 0, TEXT, ("One",)), _chunk("a", 1, "Another section about parking. Parking is free.",
                                                     ("Two",))]
    encode = BagOfWords()
    first, built = build_summaries(group_sections(chunks), encode, 20)
    assert sorted(built) == ["a#One", "a#Two"] and encode.calls == 2
    again, built = build_summaries(group_sections(chunks), encode, 20, previous=first)
    assert built == [] and again == first and encode.calls == 2
    chunks[1] = _chunk("a", 1, "Changed text about lunch. Lunch is at noon.", ("Two",))
    third, built = build_summaries(group_sections(chunks), encode, 20, previous=again)
    assert built == ["a#Two"] and encode.calls == 3 and third["a#One"] is first["a#One"]


def test_hierarchical_chunks_are_grouped_by_their_leaves():
    chunks = [Chunk(chunk_id="doc", document_id="a", strategy="hierarchical", text="x.", start=0, end=2,
                    token_count=1, position=0, level=0),
              *(Chunk(chunk_id=f"leaf{i}", document_id="a", strategy="hierarchical", text=f"w{i}.", start=0, end=3,
                      token_count=1, position=i, level=2, heading_path=["H"]) for i in range(3))]
    [section] = group_sections(chunks)
    assert section.chunk_ids == ("leaf0", "leaf1", "leaf2")


def test_cut_to_budget_keeps_whole_sentences_and_state_round_trips(tmp_path):
    from ragloom.indexing.summaries import cut_to_budget, load_state, save_state

    assert cut_to_budget("One two three. Four five. Six seven.", 6) == ("One two three. Four five.", 5)
    assert cut_to_budget("One two three four five six seven.", 3) == ("One two three", 3)
    summaries, _ = build_summaries(group_sections([_chunk("a", 0, TEXT, ("One",))]), BagOfWords(), 20)
    save_state(tmp_path / "s.json", summaries)
    assert load_state(tmp_path / "s.json") == summaries
    assert load_state(tmp_path / "missing.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert load_state(tmp_path / "bad.json") == {}  # unreadable: everything is rebuilt, nothing lost
