"""Prometheus text exposition, parsed with `prometheus_client`'s own parser.

`samples(text)` flattens a scrape into (name, labels, value) triples, leaving out histogram
buckets (their `_sum` and `_count` stay): what a benchmark needs of an engine's /metrics, in a
bounded number of rows per scrape.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Sample", "samples"]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float

    @property
    def key(self) -> str:
        """`name{a="1",b="2"}` with labels sorted, or the bare name."""
        if not self.labels:
            return self.name
        return self.name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items())) + "}"


def samples(text: str) -> list[Sample]:
    """Every sample of a scrape but histogram buckets; raises ValueError on text that is not
    Prometheus exposition format."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_bucket") or s.name.endswith("_created"):
                continue
            out.append(Sample(s.name, dict(s.labels), float(s.value)))
    return out
