"""Moving a collection built before the metadata layout (types fixed by first values) onto it.

Weaviate cannot change a property's type, so a collection whose ``meta_`` properties disagree with the store's
``MetadataLayout`` is copied: every object (properties, vector, uuid) into a staging collection built with the
layout, the old one dropped, rebuilt under its own name, the copy brought back and the staging collection
dropped. Each step checks what exists first, so a run that stopped anywhere is finished by the next one, and a
run on a collection already in the layout changes nothing (idempotent). Values a declared type cannot hold
(``{"created": "last week"}`` under ``created: DATE``) are left out of their object and reported by chunk id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragloom.errors import StoreError
from ragloom.filters import META_PREFIX
from ragloom.metadata import MetadataError
from ragloom.stores.weaviate.errors import store_errors
from ragloom.stores.weaviate.inventory import ITERATOR_PAGE, default_vector
from ragloom.stores.weaviate.schema import meta_property
from ragloom.stores.weaviate.writes import INSERT_BATCH, Writes, failure_message

STAGING = "__migrating"  # a strategy's staging collection is the strategy "<strategy>__migrating"


@dataclass
class MigrationReport:
    strategy: str
    retyped: dict[str, str] = field(default_factory=dict)  # property -> "OLD -> NEW"
    copied: int = 0  # objects written into the layout (counted twice when staged and brought back)
    left_out: dict[str, str] = field(default_factory=dict)  # chunk id -> the values a declared type refused

    @property
    def changed(self) -> bool:
        return bool(self.retyped or self.copied)


class Migrate(Writes):
    def chunk_strategies(self) -> list[str]:
        """The strategies of this prefix's chunk collections (staging ones included), from their descriptions."""
        out = [str(info["strategy"]) for name, info in self.recorded_infos().items()
               if name != self.versions_name and info.get("ragloom") == "chunks" and info.get("strategy")]
        return sorted(out)

    def legacy_properties(self, strategy: str) -> dict[str, str]:
        """``meta_`` properties whose type is not the layout's: property -> its type now."""
        if not self.exists(strategy):
            return {}
        types = self.property_types(strategy, refresh=True)
        return {p: t for p, t in types.items() if p.startswith(META_PREFIX) and t != self.metadata.type_of(p)}

    def migrate_metadata(self, strategy: str) -> MigrationReport:
        """Bring ``strategy``'s collection onto the metadata layout (see the module); safe to repeat."""
        if strategy.endswith(STAGING):
            raise StoreError(f"{strategy} is a staging collection: migrate {strategy.removesuffix(STAGING)}")
        staging = strategy + STAGING
        report = MigrationReport(strategy)
        legacy = self.legacy_properties(strategy)
        report.retyped = {p: f"{t} -> {self.metadata.type_of(p)}" for p, t in legacy.items()}
        if legacy:
            info = self.collection_info(strategy) or {}
            self._rebuild_from(strategy, staging, info, report)  # 1: the old collection, copied into the layout
            self.drop_collection(strategy)  # 2
        if self.exists(staging):
            info = self.collection_info(staging) or {}
            self._rebuild_from(staging, strategy, info, report)  # 3: back under its own name
            self._drop_staging(staging)  # 4
            self.bump_version(strategy)
        return report

    def _rebuild_from(self, source: str, target: str, info: dict[str, Any], report: MigrationReport) -> None:
        """Create ``target`` in the layout (when missing) and upsert every object of ``source`` into it."""
        dimension = info.get("dimension") or self.vector_dimension(source)
        if dimension is None:
            raise StoreError(f"{self.collection_name(source)}: the vector dimension is neither recorded nor "
                             "readable (an empty collection: drop it instead)")
        self.ensure_collection(target, int(dimension), model_id=str(info.get("model_id") or ""))
        name = self.collection_name(target)
        have = self._properties(name, refresh=True)
        for prop in sorted(p for p in self.property_types(source, refresh=True)
                           if p.startswith(META_PREFIX) and p not in have):
            with store_errors(f"add property {prop} to {name}"):
                self.client.collections.use(name).config.add_property(meta_property(prop, self.metadata.type_of(prop)))
        self._properties(name, refresh=True)
        batch: list[Any] = []
        with store_errors(f"iterate {self.collection_name(source)}"):
            for obj in self._collection(source).iterator(include_vector=True, cache_size=ITERATOR_PAGE):
                batch.append(self._in_layout(obj, report))
                if len(batch) == INSERT_BATCH:
                    self._copy(name, target, batch, report)
                    batch = []
        if batch:
            self._copy(name, target, batch, report)
        if self.count(target) < self.count(source):
            raise StoreError(f"migrating {self.collection_name(source)}: {name} holds {self.count(target)} objects "
                             f"of {self.count(source)}; run the migration again")

    def _in_layout(self, obj: Any, report: MigrationReport) -> Any:
        from weaviate.classes.data import DataObject

        props: dict[str, Any] = {}
        for key, value in obj.properties.items():
            if value is None:
                continue
            if not key.startswith(META_PREFIX):
                props[key] = value
                continue
            type_name = self.metadata.type_of(key)
            try:
                stored = self.metadata.store_value(key.removeprefix(META_PREFIX), value, type_name)
            except MetadataError as e:
                chunk_id = str(obj.properties.get("chunk_id") or obj.uuid)
                report.left_out[chunk_id] = "; ".join(filter(None, [report.left_out.get(chunk_id), str(e)]))
                continue
            if stored is not None:
                props[key] = stored
        vector = default_vector(obj.vector)
        return DataObject(properties=props, uuid=obj.uuid, vector=[float(x) for x in vector] if vector else None)

    def _copy(self, name: str, target: str, batch: list[Any], report: MigrationReport) -> None:
        errors = self._insert(self._collection(target, write=True), batch, list(range(len(batch))))
        if errors:
            raise StoreError(failure_message(name, {str(batch[i].uuid): msg for i, msg in errors.items()}))
        report.copied += len(batch)

    def _drop_staging(self, staging: str) -> None:
        name = self.collection_name(staging)
        with store_errors(f"delete collection {name}"):
            self.client.collections.delete(name)
        self.forget_version(staging)
        self._known_properties.pop(name, None)
        self._bm25_analyzed.pop(name, None)

