"""A small benchmark harness: ``make bench`` runs every module of this package and writes the docs' benchmark table.

The benchmarks live here, one module per app (``pages``, ``instances``, ``billing``…), outside the apps they
measure. A module registers a benchmark with::

    from bench import benchmark

    @benchmark("Metering tick, 10,000 running instances")
    def metering_tick(report):
        ...                                  # set up data in the bench database
        with report.timer() as t:            # time one run
            tick()
        report.add("tick", t.seconds, unit="s")

``size(full, light)`` picks the amount of data: ``make bench`` uses the full sizes and publishes the numbers; CI
runs every benchmark with ``--light`` on small data, to prove they work, and publishes nothing.

Benchmarks run against a dedicated database (``var/bench.sqlite3`` or ``DATABASE_URL`` + ``_bench``) that is
migrated fresh for every run. Numbers go into ``docs/benchmarks.md`` between the ``<!-- bench:start -->`` and
``<!-- bench:end -->`` markers.
"""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

REGISTRY: list["Benchmark"] = []

# `bench --light` (CI): every benchmark runs, on smaller data, and nothing is published.
LIGHT = False


def size(full, light):
    """The full size for `make bench`, the light one for CI's run of the same code."""
    return light if LIGHT else full


@dataclass
class Timer:
    seconds: float = 0.0


class _Timing:
    def __init__(self):
        self.timer = Timer()

    def __enter__(self):
        self._start = time.perf_counter()
        return self.timer

    def __exit__(self, *exc):
        self.timer.seconds = time.perf_counter() - self._start


@dataclass
class Row:
    benchmark: str
    metric: str
    value: float
    unit: str
    note: str = ""


@dataclass
class Report:
    benchmark: str
    rows: list[Row] = field(default_factory=list)

    def timer(self) -> _Timing:
        return _Timing()

    def add(self, metric: str, value: float, *, unit: str, note: str = "") -> None:
        self.rows.append(Row(self.benchmark, metric, value, unit, note))

    def add_latencies(self, metric: str, seconds: list[float], note: str = "") -> None:
        """p50 and p95 of a list of durations, in milliseconds."""
        p50, p95 = percentiles(seconds)
        self.add(f"{metric} p50", p50, unit="ms", note=note)
        self.add(f"{metric} p95", p95, unit="ms", note=f"n={len(seconds)}" + (f"; {note}" if note else ""))


def percentiles(seconds: list[float]) -> tuple[float, float]:
    """(p50, p95) of durations in seconds, in milliseconds."""
    ms = sorted(s * 1000 for s in seconds)
    return statistics.median(ms), ms[max(0, round(0.95 * len(ms)) - 1)]


@dataclass
class Benchmark:
    title: str
    func: Callable[[Report], None]
    quick: bool


def benchmark(title: str, *, quick: bool = True):
    """Register ``func(report)``. ``quick=False`` marks a benchmark that only the full run executes."""

    def register(func):
        REGISTRY.append(Benchmark(title, func, quick))
        return func

    return register
