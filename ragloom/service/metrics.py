"""Prometheus text exposition (format 0.0.4) for the service's counters and histograms.

Written here rather than taken from ``prometheus_client``, which is not in the environment: the service needs
only labelled counters and histograms, and the text format is a few lines.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ragloom.retrieval.routing.monitor import outcome

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Counter:
    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name, self.help, self.label_names = name, help_text, tuple(labels)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(labels, 0.0)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            for labels, value in sorted(self._values.items()):
                lines.append(f"{self.name}{_labels(self.label_names, labels)} {value:g}")
        return lines


class Histogram:
    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.name, self.help, self.label_names = name, help_text, tuple(labels)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}  # counts per bucket, [sum]
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        with self._lock:
            counts, total = self._series.setdefault(labels, ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            total[0] += value

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        with self._lock:
            for labels, (counts, total) in sorted(self._series.items()):
                cumulative = 0
                for bound, count in zip((*self.buckets, float("inf")), counts, strict=True):
                    cumulative += count
                    le = "+Inf" if bound == float("inf") else f"{bound:g}"
                    bucket_labels = _labels(self.label_names, labels, 'le="' + le + '"')
                    lines.append(f"{self.name}_bucket{bucket_labels} {cumulative}")
                lines.append(f"{self.name}_sum{_labels(self.label_names, labels)} {total[0]:g}")
                lines.append(f"{self.name}_count{_labels(self.label_names, labels)} {cumulative}")
        return lines


class ServiceMetrics:
    """Everything /metrics reports."""

    def __init__(self) -> None:
        self.requests = Counter("ragloom_requests_total", "HTTP requests by route and status",
                                ("method", "route", "status"))
        self.request_seconds = Histogram("ragloom_request_duration_seconds", "HTTP request latency by route",
                                         ("route",))
        self.query_seconds = Histogram("ragloom_query_duration_seconds", "Retrieval latency by strategy run",
                                       ("strategy",))
        self.fallbacks = Counter("ragloom_query_fallbacks_total", "Queries that took a fallback, by strategy",
                                 ("strategy",))
        self.abstentions = Counter("ragloom_query_abstentions_total", "Queries that abstained, by strategy",
                                   ("strategy",))
        self.errors = Counter("ragloom_errors_total", "Requests answered with an error, by kind", ("kind",))
        self.injected = Counter("ragloom_injected_items_total", "Dynamic items injected")
        self.swept = Counter("ragloom_swept_items_total", "Expired dynamic chunks deleted by the sweeper")
        # the adaptive strategy (ragloom.retrieval.routing.monitor): retry rate = retried / queries
        self.adaptive_queries = Counter("ragloom_adaptive_queries_total", "Adaptive queries answered")
        self.adaptive_routed = Counter("ragloom_adaptive_routed_total", "Adaptive queries by the strategy routed to",
                                       ("strategy",))
        self.adaptive_used = Counter("ragloom_adaptive_used_total", "Adaptive queries by the strategy whose result "
                                     "was returned", ("strategy",))
        self.adaptive_retried = Counter("ragloom_adaptive_retried_total", "Adaptive queries retried at least once")
        self.adaptive_retries = Counter("ragloom_adaptive_retries_total", "Corrective retries, by the strategy "
                                        "retried with", ("strategy",))

    def observe_adaptive(self, metadata: Mapping[str, Any]) -> bool:
        """Count an adaptive result's route, retries and returned strategy; False for another strategy's."""
        found = outcome(metadata)
        if found is None:
            return False
        self.adaptive_queries.inc()
        self.adaptive_routed.inc(found.routed)
        self.adaptive_used.inc(found.used)
        if found.retried:
            self.adaptive_retried.inc()
            for strategy in found.tried[1:]:
                self.adaptive_retries.inc(strategy)
        return True

    def render(self) -> str:
        lines: list[str] = []
        for metric in (self.requests, self.request_seconds, self.query_seconds, self.fallbacks, self.abstentions,
                       self.errors, self.injected, self.swept, self.adaptive_queries, self.adaptive_routed,
                       self.adaptive_used, self.adaptive_retried, self.adaptive_retries):
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"
