"""Hub benchmarks: search over 100,000 items in Chinese and English, through the service and through the API."""

from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test import Client

from console.bench import benchmark

from .hub import search, services, synthetic
from .models import HubItem

ITEMS = 100_000
ROUNDS = 5
# A mix of what people type: two-character Chinese words (common and rare), English words and repo prefixes,
# numbers, filters alone and with words, and the broadest words ("模型" is in most synthetic items).
QUERIES = [
    search.HubQuery(q="对话"),
    search.HubQuery(q="中文"),
    search.HubQuery(q="医疗"),
    search.HubQuery(q="模型"),
    search.HubQuery(q="中文对话"),
    search.HubQuery(q="金融 问答"),
    search.HubQuery(q="chatglm"),
    search.HubQuery(q="qwen 7b"),
    search.HubQuery(q="THUDM/chat"),
    search.HubQuery(q="llama3 medical"),
    search.HubQuery(q="q"),
    search.HubQuery(q="对话", chip="npu"),
    search.HubQuery(q="医疗", kind="model", licence="Apache-2.0"),
    search.HubQuery(chip="mlu", kind="dataset"),
    search.HubQuery(language="zh", task="text-generation"),
    search.HubQuery(),
]
SORTS = ["mounts", "likes", "newest", "name"]


def _ensure_items(report) -> None:
    missing = ITEMS - HubItem.objects.count()
    if missing > 0:
        with report.timer() as t:
            synthetic.generate(missing)
        report.add(f"generate {missing:,} items", t.seconds, unit="s", note="generate_hub_items, in bulk")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE marketplace_hubitem")


def _service_search(query, sort) -> None:
    items = services.search_items(AnonymousUser(), query, sort)
    services.count_matches(items)
    list(items[:20])


@benchmark(f"Hub search, {ITEMS:,} items")
def hub_search(report):
    _ensure_items(report)
    note = f"{len(QUERIES)} zh/en queries × {len(SORTS)} sorts × {ROUNDS}; count + first page"
    durations = []
    for _round in range(ROUNDS):
        for query in QUERIES:
            for sort in SORTS:
                with report.timer() as t:
                    _service_search(query, sort)
                durations.append(t.seconds)
    report.add_latencies("service", durations, note=note)

    client = Client()
    durations = []
    for _round in range(ROUNDS):
        for query in QUERIES:
            params = query.as_params() | {"sort": "mounts", "limit": 20}
            with report.timer() as t:
                assert client.get("/api/v1/hub", params).status_code == 200
            durations.append(t.seconds)
    report.add_latencies("GET /api/v1/hub", durations, note="in-process test client, anonymous")
