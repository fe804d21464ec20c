"""Reranking with a real (tiny, randomly initialised) BERT cross-encoder that the tests build and save.

No reranker weights exist on our machines, so the model is random: what these tests prove is that the
loading code is real (sentence-transformers and ONNX Runtime read the saved folder) and that the order
follows the model's own scores, computed here independently with transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragloom.errors import RerankError, RetrievalError
from ragloom.options import Option
from ragloom.retrieval import RetrievalContext, Retriever, SearchRequest, get_retriever, register_retrieval_strategy
from ragloom.retrieval.rerank import (
    CrossEncoderReranker,
    OnnxCrossEncoderReranker,
    make_reranker,
    rerank,
    sigmoid,
)
from ragloom.types import RetrievedItem

WORDS = ("the a of and to in is was for on with as by at from it that this are be protein cell gene dna rna "
         "virus vaccine immune response cancer tumour growth factor receptor binding signal pathway blood "
         "heart brain liver kidney lung muscle bone skin study trial patients dose effect risk increase "
         "decrease higher lower level levels acid enzyme mouse mice human model data result results").split()
QUERY = "does the protein binding increase tumour growth"
PASSAGES = [" ".join(np.random.default_rng(i).choice(WORDS, size=10 + i)) for i in range(12)]


def build_cross_encoder(folder: Path, seed: int = 7) -> Path:
    """A 2-layer, 32-wide BERT with one output label and a WordPiece vocabulary, saved like a hub model."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=1,
                        initializer_range=0.5)  # wide random weights: scores differ visibly between passages
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), model_max_length=128).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))


@pytest.fixture(scope="module")
def reference(model_dir) -> np.ndarray:
    """The model's logits for (QUERY, passage), computed with transformers directly."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    batch = tokenizer([QUERY] * len(PASSAGES), PASSAGES, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits[:, 0].numpy().astype(np.float64)


@pytest.fixture(scope="module")
def torch_reranker(model_dir) -> CrossEncoderReranker:
    return CrossEncoderReranker(str(model_dir))


def items_in(order: list[int]) -> list[RetrievedItem]:
    return [RetrievedItem(chunk_id=f"c{i:02d}", document_id=f"d{i}", text=PASSAGES[i], score=1.0 - rank / 100,
                          lane_scores={"dense": 0.9}) for rank, i in enumerate(order)]


def test_cross_encoder_loads_the_saved_folder_and_scores_like_transformers(torch_reranker, reference):
    logits = torch_reranker.logits(QUERY, PASSAGES)
    assert np.allclose(logits, reference, atol=1e-5)
    assert np.ptp(reference) > 0.5  # the scores really differ, so the order below is the model's
    assert np.allclose(torch_reranker.score(QUERY, PASSAGES), sigmoid(reference), atol=1e-6)


def test_rerank_orders_by_the_models_scores(torch_reranker, reference):
    worst_first = [int(i) for i in np.argsort(reference)]  # the strategy's order is the model's reverse
    ranked, info = rerank(torch_reranker, QUERY, items_in(worst_first), candidates=30)
    assert [item.chunk_id for item in ranked] == [f"c{int(i):02d}" for i in np.argsort(-reference, kind="stable")]
    assert info["applied"] and info["candidates"] == len(PASSAGES) and info["below_floor"] == []
    for item in ranked:
        assert item.score == pytest.approx(float(sigmoid(reference[int(item.chunk_id[1:])])))
        assert item.lane_scores["rerank"] == item.score and "retrieval" in item.lane_scores


def test_rerank_reads_only_the_candidate_pool(torch_reranker, reference):
    order = list(range(len(PASSAGES)))
    ranked, info = rerank(torch_reranker, QUERY, items_in(order), candidates=5)
    assert info["candidates"] == 5
    assert sorted(item.chunk_id for item in ranked) == [f"c{i:02d}" for i in range(5)]


def test_relevance_floor_drops_items_below_it(torch_reranker, reference):
    floor = float(np.median(sigmoid(reference)))
    ranked, info = rerank(torch_reranker, QUERY, items_in(list(range(len(PASSAGES)))), candidates=30, floor=floor)
    assert ranked and all(item.score >= floor for item in ranked)
    assert len(ranked) + len(info["below_floor"]) == len(PASSAGES) and info["below_floor"]


def test_onnx_fp32_matches_the_cross_encoder_and_int8_keeps_close(model_dir, reference, tmp_path):
    fp32 = OnnxCrossEncoderReranker(str(model_dir), cache_dir=tmp_path)
    assert fp32.onnx_path.exists() and fp32.onnx_path.is_relative_to(tmp_path)
    assert np.allclose(fp32.logits(QUERY, PASSAGES), reference, atol=1e-4)
    int8 = OnnxCrossEncoderReranker(str(model_dir), quantized=True, cache_dir=tmp_path)
    assert int8.onnx_path != fp32.onnx_path
    assert np.corrcoef(int8.logits(QUERY, PASSAGES), reference)[0, 1] > 0.9


def test_the_classifier_export_does_not_reuse_the_embedders_file(model_dir, tmp_path):
    from ragloom.embedding.onnx import ModelLayout

    layout = ModelLayout(model_dir)
    assert layout.fingerprint("classifier") != layout.fingerprint()


def test_unknown_models_raise_a_clear_error(tmp_path):
    assert make_reranker("none") is None
    with pytest.raises(RerankError, match="neither a local folder nor reachable"):
        make_reranker(str(tmp_path / "missing"), "onnx", cache_dir=tmp_path)
    with pytest.raises(RerankError, match="could not load the reranking model"):
        make_reranker(str(tmp_path / "missing"), "torch")
    with pytest.raises(RerankError, match="backend"):
        make_reranker("some/model", "tensorflow")


# the retriever template -------------------------------------------------------------------------------


class PoolRetriever(Retriever):
    """Returns PASSAGES as items in the order given, as many as the request asks for."""

    declared_options: dict[str, Option] = {"order": Option((), of=int, help="passage numbers, best first")}

    def get_search_results(self, request: SearchRequest, **options: Any) -> list[RetrievedItem]:
        self.fetch_k = request.fetch_k
        return items_in(list(options["order"]))[: request.fetch_k]


register_retrieval_strategy("test_rerank_pool", PoolRetriever)


def search(context: RetrievalContext, k: int = 3, **options: Any):
    return get_retriever("test_rerank_pool", context).search(QUERY, k=k, dedup=False, abstain=False, **options)


def test_search_reranks_the_candidates_after_the_strategy(torch_reranker, reference):
    context = RetrievalContext(vectors=None, reranker=torch_reranker)
    worst_first = tuple(int(i) for i in np.argsort(reference))
    result = search(context, k=3, order=worst_first, rerank_candidates=10)
    best = [int(i) for i in np.argsort(-reference[list(worst_first[:10])])[:3]]
    assert [item.chunk_id for item in result.items] == [f"c{worst_first[i]:02d}" for i in best]
    assert result.metadata.details["rerank"]["applied"] and result.metadata.details["rerank"]["candidates"] == 10
    assert "rerank" in result.metadata.timings_ms
    # off per query: the strategy's order stands and fetch_k is not widened for the reranker
    plain = search(context, k=3, order=worst_first, rerank=False)
    assert [item.chunk_id for item in plain.items] == [f"c{i:02d}" for i in worst_first[:3]]
    assert plain.metadata.details["rerank"] == {"applied": False, "reason": "rerank=False"}


@pytest.mark.parametrize("abstain", [False, True])
def test_a_relevance_floor_that_drops_everything_abstains_only_when_asked(torch_reranker, abstain):
    context = RetrievalContext(vectors=None, reranker=torch_reranker)
    result = get_retriever("test_rerank_pool", context).search(QUERY, k=5, dedup=False, abstain=abstain,
                                                               order=tuple(range(12)), relevance_floor=1.0)
    assert result.items == [] and len(result.metadata.details["rerank"]["below_floor"]) == 12
    assert result.metadata.abstained is abstain
    assert result.metadata.abstain_reason == ("no results" if abstain else "")


def test_no_reachable_model_means_no_rerank_and_the_result_says_so(tmp_path):
    calls = []

    def load() -> Any:
        calls.append(1)
        return make_reranker(str(tmp_path / "not-a-model"), "torch")

    context = RetrievalContext(vectors=None, load_reranker=load)
    order = (3, 1, 2, 0)
    for _ in range(2):
        result = search(context, k=4, order=order)
        assert [item.chunk_id for item in result.items] == [f"c{i:02d}" for i in order]
        assert result.metadata.details["rerank"]["applied"] is False
        assert "could not load the reranking model" in result.metadata.details["rerank"]["reason"]
    assert len(calls) == 1  # tried once per context
    assert RetrievalContext(vectors=None).reranker()[0] is None


def test_rerank_options_are_validated(torch_reranker):
    context = RetrievalContext(vectors=None, reranker=torch_reranker)
    with pytest.raises(RetrievalError, match="relevance_floor"):
        search(context, order=(0,), relevance_floor=1.5)
    with pytest.raises(RetrievalError, match="rerank_candidates"):
        search(context, order=(0,), rerank_candidates=0)
