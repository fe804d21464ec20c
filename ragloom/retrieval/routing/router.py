"""Routers: pick the retrieval strategy for one query. One interface, three implementations:

- ``RuleRouter``: the default when no trained model exists (hand-set rules on the query's features);
- ``LearnedRouter``: a scikit-learn model predicting each strategy's nDCG@10 from the features, trained by
  ``ragloom router train`` on evaluation runs; saved with skops (a format that rebuilds only the types it is
  told to trust, and runs no code on load: never pickle) plus a JSON card holding the feature version, the
  strategies and a hash of the training data; a model of another feature version is refused. It is loaded only
  from the configured file (``Settings.resolved_router_model``), never from a path a request names;
- ``LLMRouter``: asks the configured LLM (RAGLOOM_LLM_*) to choose, given each strategy's one-line summary;
  its answer must name one of the candidates, else it is an error (the adaptive strategy then uses the rules).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragloom import files
from ragloom.errors import RagloomError
from ragloom.retrieval.routing.features import FEATURE_NAMES, FEATURE_VERSION
from ragloom.types import sha256_hex

# The types a router file may hold beyond skops' own defaults (scikit-learn's estimators, numpy arrays): the
# trees of the ExtraTrees regressor ``ragloom router train`` fits. Anything else in a file refuses to load.
TRUSTED_TYPES = ("sklearn.tree._tree.Tree",)


class RouterError(RagloomError):
    """A router that cannot be loaded or gave an answer outside the registered strategies. Its messages name no
    file (they reach clients in a result's metadata): the configured file is RAGLOOM_ROUTER_MODEL."""


class Router(Protocol):
    kind: str
    reads_signals: bool  # whether ``route`` reads the lane signals (else only the query's form is computed)

    def route(self, query: str, features: np.ndarray, candidates: Sequence[str]) -> tuple[str, str]:
        """(the chosen strategy, one of ``candidates``; why)."""


def _feature(features: np.ndarray, name: str) -> float:
    return float(features[FEATURE_NAMES.index(name)])


@dataclass(frozen=True)
class RuleRouter:
    """Measured tendencies as rules: queries with codes or digits go to hybrid (exact terms matter); a question
    naming an entity (a wh-word and at least ``min_capitalized`` capitalized words after the first) goes to
    graph_rag, whose walk follows the entities a multi-hop question bridges; otherwise the first candidate. A
    rule whose strategy is not a candidate is skipped. ``needs_wh`` False lets a statement naming an entity go
    to graph_rag too. The fields exist so a benchmark can choose among the variants leave-one-dataset-out; the
    defaults are what ``adaptive`` ships. (Dev-set figures: README, adaptive.)"""

    min_capitalized: int = 1
    needs_wh: bool = True
    kind = "rules"
    reads_signals = False  # the query's form only: the route stage runs no lane query for it

    def route(self, query: str, features: np.ndarray, candidates: Sequence[str]) -> tuple[str, str]:
        def pick(name: str, why: str) -> tuple[str, str] | None:
            return (name, why) if name in candidates else None

        wh = sum(_feature(features, f"wh_{w}") for w in ("what", "who", "when", "where", "which"))
        if _feature(features, "codes") > 0 or _feature(features, "digits") > 0:
            got = pick("hybrid", "codes or digits: exact terms matter")
            if got:
                return got
        if (wh or not self.needs_wh) and _feature(features, "capitalized") >= self.min_capitalized:
            got = pick("graph_rag", "a question naming an entity: the graph can bridge to what it asks")
            if got:
                return got
        return candidates[0], "default: first strategy of the chain"


@dataclass
class LearnedRouter:
    """A multi-output regressor (features -> each strategy's expected nDCG@10); routes to the argmax among the
    candidates."""

    model: Any
    strategies: list[str]
    card: dict[str, Any] = field(default_factory=dict)
    kind: str = "learned"
    reads_signals: bool = True

    def predict_one(self, features: np.ndarray) -> np.ndarray:
        """The model's prediction for one row. A tree ensemble is walked here (its arrays, no per-call checks):
        scikit-learn's ``predict`` costs ~1 ms per 5 trees per call on a busy machine, this ~0.01 ms per tree."""
        trees = getattr(self.model, "estimators_", None)
        if not trees or not all(hasattr(t, "tree_") for t in trees):
            return np.asarray(self.model.predict(features.reshape(1, -1)))[0]
        x = np.asarray(features, dtype=np.float32)  # scikit-learn's trees compare in float32
        total = None
        for estimator in trees:
            tree = estimator.tree_
            left, right, feature, threshold = tree.children_left, tree.children_right, tree.feature, tree.threshold
            node = 0
            while left[node] != -1:
                node = left[node] if x[feature[node]] <= threshold[node] else right[node]
            value = tree.value[node][:, 0]
            total = value.copy() if total is None else total + value
        return total / len(trees)

    def route(self, query: str, features: np.ndarray, candidates: Sequence[str]) -> tuple[str, str]:
        predicted = self.predict_one(features)
        scores = {s: float(p) for s, p in zip(self.strategies, predicted, strict=True) if s in candidates}
        if not scores:
            return candidates[0], "model knows none of the chain's strategies: first of the chain"
        best = max(scores, key=lambda s: (scores[s], -list(candidates).index(s)))
        return best, "predicted nDCG@10 " + ", ".join(f"{s} {v:.3f}" for s, v in scores.items())

    # artifact ---------------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        import skops.io

        path = Path(path)
        blob = skops.io.dumps(self.model)
        files.write_bytes(path, blob)  # a service loading the router never reads half a model
        card = {**self.card, "format": "skops", "feature_version": FEATURE_VERSION,
                "feature_names": list(FEATURE_NAMES), "strategies": self.strategies, "model_sha256": sha256_hex(blob)}
        files.write_text(card_path(path), json.dumps(card, indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> LearnedRouter:
        """The router saved at ``path`` (the configured file: callers pass ``Settings.resolved_router_model``)."""
        import skops.io

        path = Path(path)
        card_file = card_path(path)
        if not path.is_file() or not card_file.is_file():
            raise RouterError("no trained router at RAGLOOM_ROUTER_MODEL (train one with `ragloom router train`)")
        try:
            card = json.loads(card_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise RouterError("the trained router's card is unreadable: retrain with `ragloom router train`") from e
        if not isinstance(card, dict) or card.get("feature_version") != FEATURE_VERSION or \
                card.get("feature_names") != list(FEATURE_NAMES):
            version = card.get("feature_version") if isinstance(card, dict) else None
            raise RouterError(f"the trained router was made for feature version {version}; this code computes "
                              f"version {FEATURE_VERSION}: retrain with `ragloom router train`")
        blob = path.read_bytes()
        if sha256_hex(blob) != card.get("model_sha256"):
            raise RouterError("the trained router does not match its card (sha256 differs): retrain it")
        try:
            untrusted = sorted(set(skops.io.get_untrusted_types(data=blob)) - set(TRUSTED_TYPES))
            if untrusted:
                raise RouterError(f"the trained router holds types outside the trusted list: {untrusted[:5]}")
            model = skops.io.loads(blob, trusted=list(TRUSTED_TYPES))
        except RouterError:
            raise
        except Exception as e:  # skops' own errors, a zip that is not one, a pickle: all "not a router file"
            raise RouterError(f"the trained router is not a skops model file ({type(e).__name__}): retrain "
                              "it with `ragloom router train`") from e
        if not hasattr(model, "predict"):
            raise RouterError("the trained router's file holds no model")
        return cls(model, list(card["strategies"]), card)


def card_path(model_path: Path) -> Path:
    return model_path.with_suffix(".json")


def data_hash(rows: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the training data (query ids, feature values and per-strategy scores), order-independent."""
    text = "\n".join(sorted(json.dumps(r, sort_keys=True, default=float) for r in rows))
    return sha256_hex(text)


LLM_SCHEMA = {"type": "object", "properties": {"strategy": {"type": "string"}, "reason": {"type": "string"}},
              "required": ["strategy"]}


class LLMRouter:
    """ADR-003's single selector: the model gets each candidate's one-line summary and names one."""

    kind = "llm"
    reads_signals = False

    def __init__(self, client: Any, summaries: Mapping[str, str]) -> None:
        self.client = client
        self.summaries = dict(summaries)

    def messages(self, query: str, candidates: Sequence[str]) -> list[dict[str, str]]:
        options = "\n".join(f"- {name}: {self.summaries.get(name, '')}" for name in candidates)
        return [{"role": "system", "content": "You choose the retrieval strategy that will find the passages "
                 "answering a query. Answer with JSON {\"strategy\": name, \"reason\": short}."},
                {"role": "user", "content": f"Strategies:\n{options}\n\nQuery: {query}"}]

    def route(self, query: str, features: np.ndarray, candidates: Sequence[str]) -> tuple[str, str]:
        reply, _ = self.client.chat_json(self.messages(query, candidates), LLM_SCHEMA, name="route",
                                         max_tokens=80)
        return validate_choice(reply, candidates)


def validate_choice(reply: Any, candidates: Sequence[str]) -> tuple[str, str]:
    """The LLM's reply checked: a JSON object whose ``strategy`` is one of ``candidates``."""
    if not isinstance(reply, Mapping) or not isinstance(reply.get("strategy"), str):
        raise RouterError(f"LLM router: expected {{\"strategy\": name}}, got {reply!r:.200}")
    name = reply["strategy"].strip().lower()
    if name not in candidates:
        raise RouterError(f"LLM router chose {reply['strategy']!r}, not one of {', '.join(candidates)}")
    return name, f"llm: {str(reply.get('reason', ''))[:200]}"
