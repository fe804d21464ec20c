"""Entity-type accuracy of the graph against the hand-labelled names of tests/data/entity_types.json.

Builds the graph the way an incremental ingest does (``sync_graph`` over a growing chunk set, one batch after
the other) in a fresh Neo4j namespace per corpus, then reads the stored type of every labelled name and
scores it. Four corpora: the sample corpus (recursive chunks, one document per batch, in path order), the
seeded MuSiQue subset the labels were drawn from (one chunk per passage, 50 passages per batch), and two
more MuSiQue subsets, each drawn from the passages the earlier ones left out: one labelled after the first
type cues were written, one before the cues of 2026-11-28 were (each held out for those). NER labels
are scored coarsely: PERSON, ORG, GPE and LOC as themselves, every other label as ``other``; ``place``
accuracy also counts GPE/LOC for each other. A labelled name the graph does not hold counts as wrong.

Also, over every entity (labelled or not): how many hold the type the same corpus gets when synced in one go,
i.e. how far the batch order decides a type.

    python benchmarks/entity_types.py [--batch-musique 50] [--one-batch]
    python benchmarks/entity_types.py --candidates musique   # names to label: seeded sample with context
    python benchmarks/entity_types.py --candidates musique_heldout   # the held-out sample (another seed)
    python benchmarks/entity_types.py --candidates musique_heldout2  # the second held-out sample
    python benchmarks/entity_types.py --retypings musique    # entities a type cue retypes, for a hand audit
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from collections import Counter
from pathlib import Path

from ragloom.chunking.base import chunker_for
from ragloom.extraction import extractor_for
from ragloom.extraction.resolution import normalize_name
from ragloom.indexing.graph import sync_graph
from ragloom.parsing.sources import parse_sources
from ragloom.settings import Settings
from ragloom.stores.neo4j import Neo4jStore
from ragloom.types import Chunk, make_chunk_id

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO / "tests" / "data" / "entity_types.json"
SAMPLE = REPO / "sample_corpus"
MUSIQUE = Path("/work/shared/data/musique/corpus.jsonl")
MUSIQUE_PASSAGES = 300
SEED = 33
HELDOUT_SEED = 34
HELDOUT2_SEED = 35
COARSE = ("PERSON", "ORG", "GPE", "LOC")


def coarse(label: str) -> str:
    return label if label in COARSE else "other"


def sample_documents() -> list[list[Chunk]]:
    """The sample corpus's recursive chunks, one list per document in path order."""
    docs = sorted(parse_sources([SAMPLE], SAMPLE).documents, key=lambda d: d.document_id)
    chunker = chunker_for("recursive")
    return [c for c in (chunker.chunk(d) for d in docs) if c]


# corpus name -> seed of its MuSiQue subset (and of the names drawn from it for labelling), in the order drawn
MUSIQUE_SEEDS = {"musique": SEED, "musique_heldout": HELDOUT_SEED, "musique_heldout2": HELDOUT2_SEED}


def musique_passages(seed: int = SEED) -> list[dict]:
    """The seeded subset of MuSiQue passages the labels come from. Each later seed draws from the passages the
    earlier subsets left out (the held-out samples, each labelled before the type rules it scores were changed)."""
    rows = [json.loads(line) for line in MUSIQUE.open(encoding="utf-8")]
    taken: set[str] = set()
    for earlier in MUSIQUE_SEEDS.values():
        subset = random.Random(earlier).sample([r for r in rows if r["_id"] not in taken], MUSIQUE_PASSAGES)
        if earlier == seed:
            return sorted(subset, key=lambda r: r["_id"])
        taken.update(r["_id"] for r in subset)
    raise ValueError(f"no MuSiQue subset has seed {seed}")


def musique_chunks(seed: int = SEED) -> list[Chunk]:
    chunks = []
    for row in musique_passages(seed):
        text = row["text"]
        chunks.append(Chunk(chunk_id=make_chunk_id(row["_id"], "recursive", "types", 0, len(text), text),
                            document_id=row["_id"], strategy="recursive", text=text, start=0, end=len(text),
                            token_count=len(text.split()), position=0))
    return chunks


def ingest(store: Neo4jStore, extractor, batches: list[list[Chunk]]) -> None:
    """Sync a growing chunk set, batch after batch, as files arriving over time would."""
    seen: list[Chunk] = []
    for batch in batches:
        seen.extend(batch)
        sync_graph(store, extractor, "recursive", list(seen), log=lambda _: None)


def build(settings: Settings, extractor, batches: list[list[Chunk]],
          cues: dict | None = None) -> dict[str, list[tuple[int, str, str]]]:
    """The stored types of a graph synced batch after batch, in a namespace of its own (cleared after); with
    ``cues`` (a dict), also fills it with what the type cues did (``cue_report``)."""
    store = Neo4jStore.connect(settings, namespace=f"bench-types-{uuid.uuid4().hex[:8]}")
    try:
        ingest(store, extractor, batches)
        if cues is not None:
            cues.update(cue_report(store))
        return stored_types(store)
    finally:
        store.clear()
        store.close()


def cue_report(store: Neo4jStore) -> dict:
    """Type cues (ragloom.extraction.cues; absent before they existed): spans each rule fired on, entities with
    a cue, entities whose type a cue decided, and normalized name -> (type, {rule: spans}) of cued entities."""
    try:
        from ragloom.extraction.cues import cued_type
    except ImportError:  # the code before type cues: nothing to report
        return {"rules": {}, "cued": 0, "decided": 0, "by_name": {}}
    rows = store._run(("MATCH (e:Entity) WHERE e.ns = $ns AND size(coalesce(e.type_cues, [])) > 0 "
                       "RETURN e.norm AS norm, e.type AS type, e.type_cues AS cues, e.type_cue_counts AS counts, "
                       "e.type_labels AS labels, e.type_votes AS votes", {"ns": store.namespace}))
    rules: Counter[str] = Counter()
    decided = 0
    by_name = {}
    for r in rows:
        cues = dict(zip(r["cues"], r["counts"], strict=True))
        rules.update(cues)
        votes = dict(zip(r["labels"] or [], r["votes"] or [], strict=True))
        decided += cued_type(cues, votes, r["type"]) is not None
        by_name[r["norm"]] = (r["type"], cues, votes)
    return {"rules": dict(sorted(rules.items())), "cued": len(rows), "decided": decided, "by_name": by_name}


def order_agreement(held: dict[str, list[tuple[int, str, str]]],
                    one_sync: dict[str, list[tuple[int, str, str]]]) -> tuple[int, int]:
    """(entities typed as in the one-sync graph, entities compared): by canonical name, names of one entity only."""
    def typed(h: dict[str, list[tuple[int, str, str]]]) -> dict[str, str]:
        return {name: t for found in h.values() if len(found) == 1 for _, t, name in found}
    a, b = typed(held), typed(one_sync)
    common = set(a) & set(b)
    return sum(a[n] == b[n] for n in common), len(common)


def stored_types(store: Neo4jStore) -> dict[str, list[tuple[int, str, str]]]:
    """normalized name or alias -> [(chunks, type, name)] of the entities holding it."""
    rows = store._run(("MATCH (e:Entity) WHERE e.ns = $ns RETURN e.name AS name, e.type AS type, "
                       "[e.norm] + coalesce(e.alias_norms, []) AS keys, e.chunk_count AS chunks",
                       {"ns": store.namespace}))
    held: dict[str, list[tuple[int, str, str]]] = {}
    for r in rows:
        for key in dict.fromkeys(r["keys"]):
            held.setdefault(key, []).append((r["chunks"] or 0, r["type"], r["name"]))
    return held


def score(gold: list[dict], held: dict[str, list[tuple[int, str, str]]]) -> dict:
    right = place_right = missing = 0
    wrong = []
    for item in gold:
        found = sorted(held.get(normalize_name(item["name"]), []), reverse=True)
        if not found:
            missing += 1
            wrong.append(f"{item['name']}: {item['label']} -> (not in graph)")
            continue
        predicted = coarse(found[0][1])
        places = {"GPE", "LOC"}
        right += predicted == item["label"]
        place_right += predicted == item["label"] or {predicted, item["label"]} <= places
        if predicted != item["label"]:
            wrong.append(f"{item['name']}: {item['label']} -> {found[0][1]}")
    n = len(gold)
    return {"n": n, "accuracy": right / n, "place_accuracy": place_right / n, "missing": missing, "wrong": wrong}


def candidates(corpus: str, settings: Settings, n: int) -> None:
    """Print the names the extractor finds, with a context, for hand labelling (the NER label is not shown)."""
    extractor = extractor_for(settings, n_process=1)
    seed = MUSIQUE_SEEDS.get(corpus)
    chunks = musique_chunks(seed) if seed else [c for d in sample_documents() for c in d]
    extraction = extractor.extract(chunks)
    texts = {c.chunk_id: c.text for c in chunks}
    first = {}
    for m in extraction.mentions:
        first.setdefault(m.entity_id, m.chunk_id)
    entities = sorted(extraction.entities, key=lambda e: e.entity_id)
    if seed:
        entities = random.Random(seed).sample(entities, min(n, len(entities)))
    for e in sorted(entities, key=lambda e: e.name.casefold()):
        text = texts[first[e.entity_id]]
        at = text.find(e.name)
        context = text[max(0, at - 90): at + len(e.name) + 90] if at >= 0 else text[:180]
        print(json.dumps({"name": e.name, "context": " ".join(context.split())}, ensure_ascii=False))


def retypings(corpus: str, settings: Settings) -> None:
    """Print every entity whose type its cues change, with a chunk where a cue for the new type fired (the name's
    first place in that chunk, which may be another mention of it), for a hand audit of the rules on unlabelled
    text: the corpus extracted in one batch, in memory, each entity's label vote with and without cues."""
    from ragloom.extraction.cues import cued_type
    from ragloom.extraction.resolution import voted_type

    seed = MUSIQUE_SEEDS.get(corpus)
    chunks = musique_chunks(seed) if seed else [c for d in sample_documents() for c in d]
    extraction = extractor_for(settings, n_process=1).extract(chunks)
    votes: dict[str, Counter[str]] = {}
    cues: dict[str, Counter[str]] = {}
    where: dict[str, list[tuple[str, tuple[str, ...]]]] = {}  # entity id -> (chunk id, cue rules) of cued mentions
    for m in extraction.mentions:
        votes.setdefault(m.entity_id, Counter()).update(dict(m.labels))
        cues.setdefault(m.entity_id, Counter()).update(dict(m.cues))
        if m.cues:
            where.setdefault(m.entity_id, []).append((m.chunk_id, tuple(rule for rule, _ in m.cues)))
    texts = {c.chunk_id: c.text for c in chunks}
    fired: Counter[str] = Counter()
    moved = 0
    for e in sorted(extraction.entities, key=lambda e: e.name.casefold()):
        tally = cues[e.entity_id]
        fired.update(tally)
        before, after = voted_type(votes[e.entity_id], e.type), voted_type(votes[e.entity_id], e.type, tally)
        if before != after:
            moved += 1
            # the context of a mention whose cue points to the new type (another mention's may point elsewhere)
            deciding = [chunk for chunk, rules in where[e.entity_id]
                        if any(cued_type({r: 1}, votes[e.entity_id], e.type) == after for r in rules)]
            text = texts[(deciding or [where[e.entity_id][0][0]])[0]]
            at = max(0, text.find(e.name))
            context = " ".join(text[max(0, at - 90): at + len(e.name) + 60].split())
            print(f"{e.name}: {before} -> {after}, cues {dict(tally)}, labels {dict(votes[e.entity_id])} :: {context}")
    print(f"{corpus}: spans per rule {dict(sorted(fired.items()))}; "
          f"{sum(1 for t in cues.values() if t)} entities with a cue, {moved} retyped by one")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-musique", type=int, default=50, help="MuSiQue passages per ingest batch")
    parser.add_argument("--one-batch", action="store_true", help="ingest each corpus in a single sync")
    parser.add_argument("--candidates", choices=("sample", *MUSIQUE_SEEDS), help="print names to label, then stop")
    parser.add_argument("--n", type=int, default=100, help="with --candidates musique: how many names")
    parser.add_argument("--retypings", choices=("sample", *MUSIQUE_SEEDS),
                        help="print the entities whose type a cue changes (one batch, no store), then stop")
    args = parser.parse_args()
    settings = Settings.from_env()
    if args.candidates:
        candidates(args.candidates, settings, args.n)
        return
    if args.retypings:
        retypings(args.retypings, settings)
        return
    gold = json.loads(LABELS.read_text(encoding="utf-8"))
    extractor = extractor_for(settings, n_process=1)
    corpora = {"sample_corpus": sample_documents()}
    for corpus, seed in MUSIQUE_SEEDS.items():
        if corpus in gold:
            chunks = musique_chunks(seed)
            corpora[corpus] = [chunks[i: i + args.batch_musique]
                               for i in range(0, MUSIQUE_PASSAGES, args.batch_musique)]
    results = {}
    agreement = {}
    cue_reports = {}
    for corpus, batches in corpora.items():
        cue_reports[corpus] = {}
        one_sync = build(settings, extractor, [[c for b in batches for c in b]],
                         cues=cue_reports[corpus] if args.one_batch else None)
        held = one_sync if args.one_batch else build(settings, extractor, batches, cues=cue_reports[corpus])
        results[corpus] = score(gold[corpus]["entities"], held)
        agreement[corpus] = order_agreement(held, one_sync)
    total = Counter()
    for corpus, r in results.items():
        total.update({"n": r["n"], "right": round(r["accuracy"] * r["n"]),
                      "place": round(r["place_accuracy"] * r["n"])})
        print(f"{corpus}: {r['n']} names, type accuracy {r['accuracy']:.3f}, places as one {r['place_accuracy']:.3f}, "
              f"{r['missing']} not in graph; {agreement[corpus][0]} of {agreement[corpus][1]} entities typed as "
              f"when synced in one go")
        for line in r["wrong"]:
            print(f"    {line}")
        cues = cue_reports[corpus]
        if cues.get("rules"):
            print(f"  type cues: spans per rule {cues['rules']}; {cues['cued']} entities with a cue, "
                  f"{cues['decided']} typed by one")
            for item in gold[corpus]["entities"]:
                found = cues["by_name"].get(normalize_name(item["name"]))
                if found:
                    print(f"    labelled {item['name']} ({item['label']}): type {found[0]}, cues {found[1]}, "
                          f"labels {found[2]}")
    print(f"all: {total['n']} names, type accuracy {total['right'] / total['n']:.3f}, "
          f"places as one {total['place'] / total['n']:.3f}")


if __name__ == "__main__":
    main()
