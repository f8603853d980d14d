"""Hub benchmarks: search over 100,000 items in Chinese and English, through the service and through the API."""

from django.contrib.auth.models import AnonymousUser, Group
from django.db import connection
from django.test import Client

from accounts.models import User
from accounts.ops import roles
from bench import benchmark, size
from marketplace.hub import search, services, synthetic
from marketplace.images import catalog as image_catalog
from marketplace.images import services as images
from marketplace.models import HubItem, Image

ITEMS = size(100_000, 5_000)
ROUNDS = size(5, 1)
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


# The image marketplace ---------------------------------------------------------------------------------

IMAGES = size(500, 60)
IMAGE_ROUNDS = size(20, 3)
IMAGE_PAGES = [
    ("/marketplace/", {}),
    ("/marketplace/", {"q": "昇腾 训练"}),
    ("/marketplace/", {"q": "pytorch", "family": "mlu", "sort": "rating"}),
    ("/marketplace/", {"category": "xinchuang", "os": "kylin"}),
    ("/api/v1/images", {"q": "大模型", "limit": 24}),
    ("/marketplace/images/mindspore-2.3/", {}),
]


def _ensure_images(report) -> None:
    """The official catalogue plus listed community images up to ``IMAGES``, written through the services."""
    image_catalog.load()
    missing = IMAGES - Image.objects.listed().count()
    if missing <= 0:
        return
    author, _created = User.objects.get_or_create(email="bench-author@example.com")
    staff, _created = User.objects.get_or_create(email="bench-staff@example.com", defaults={"is_staff": True})
    roles.sync_groups()
    staff.groups.add(Group.objects.get(name=roles.OPS))  # reviewing images is the ops role's
    bases = list(Image.objects.filter(owner__isnull=True))
    with report.timer() as t:
        for i in range(missing):
            image = images.clone_to_mine(author, bases[i % len(bases)], name=f"社区镜像 community image {i}")
            images.review_image(images.publish(author, image), True, "", staff)
    report.add(f"create {missing} community images", t.seconds, unit="s", note="clone, publish, review")


@benchmark(f"Image marketplace pages, {IMAGES} images")
def image_pages(report):
    _ensure_images(report)
    client = Client()
    durations = []
    for _round in range(IMAGE_ROUNDS):
        for path, params in IMAGE_PAGES:
            with report.timer() as t:
                assert client.get(path, params).status_code == 200
            durations.append(t.seconds)
    report.add_latencies("list, search, filters, API, detail", durations, note="in-process test client, anonymous")
