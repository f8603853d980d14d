"""Starter entries with real files: ``load_hub`` commits the bytes built at install (the console's own zh-en
strings, the catalogue's chip figures), they download byte for byte and are laid out where mounts read them, loading
again adds no revision, and every list and the mount picker mark the entries that are metadata only."""

import csv
import io
import json
from pathlib import Path

import pytest
from django.test import Client

from instances.runtime import tiny_model
from instances.workloads.ngram import NgramModel
from marketplace import seed as hub_catalog
from marketplace.hub import repos
from marketplace.models import HubCommit, HubItem
from marketplace.seed import built

pytestmark = pytest.mark.django_db


@pytest.fixture
def hub_with_files(cloud_storage, settings, tmp_path, django_capture_on_commit_callbacks):
    settings.LOCAL_HUB_ROOT = tmp_path / "hub"
    with django_capture_on_commit_callbacks(execute=True):
        hub_catalog.load()
    return settings.LOCAL_HUB_ROOT


def _download(client, url) -> bytes:
    answer = client.get(url)
    assert answer.status_code == 200, url
    return b"".join(answer.streaming_content)


def test_the_parallel_corpus_downloads_as_built_and_holds_the_consoles_own_translations(hub_with_files):
    item = HubItem.objects.get(repo="gpucloud/console-zh-en")
    body = _download(Client(), "/datasets/gpucloud/console-zh-en/resolve/main/data/train.jsonl")

    assert item.has_bytes and body == built.files("console-zh-en")["data/train.jsonl"]
    pairs = [json.loads(line) for line in body.decode().splitlines()]
    assert {"en": "Metadata only", "zh": "仅有元数据"} in pairs
    assert item.rows == len(pairs) and item.size_bytes == len(body)
    assert list(item.files.values_list("path", "size_bytes")) == [("data/train.jsonl", len(body))]


def test_the_chip_figures_are_a_csv_of_the_catalogues_chips(hub_with_files):
    body = _download(Client(), "/datasets/gpucloud/xinchuang-chip-figures/resolve/main/chips.csv")
    rows = {row["slug"]: row for row in csv.DictReader(io.StringIO(body.decode()))}

    assert rows["ascend-910b"]["name_zh"] == "昇腾 910B" and rows["ascend-910b"]["memory_gb"] == "64"
    assert rows["ascend-910b"]["mfu"] == "0.613"


def test_the_files_are_laid_out_where_a_machine_mounts_them(hub_with_files):
    laid_out = Path(hub_with_files) / "gpucloud" / "console-zh-en" / "data" / "train.jsonl"

    assert laid_out.read_bytes() == built.files("console-zh-en")["data/train.jsonl"]
    assert laid_out.stat().st_mode & 0o004  # every machine's user reads it, read-only


def test_loading_again_adds_no_revision_and_a_changed_source_adds_one(hub_with_files, monkeypatch):
    before = HubCommit.objects.count()
    hub_catalog.load()
    assert HubCommit.objects.count() == before

    monkeypatch.setitem(built.BUILDERS, "chip-figures", lambda: {"chips.csv": b"slug\nnew-chip\n"})
    hub_catalog.load()
    item = HubItem.objects.select_related("head").get(repo="gpucloud/xinchuang-chip-figures")
    assert HubCommit.objects.count() == before + 1 and item.head.parent is not None
    assert [f.path for f in repos.tree(item.head)] == ["chips.csv"] and item.size_bytes == len(b"slug\nnew-chip\n")


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_lists_and_the_mount_picker_mark_the_entries_that_are_metadata_only(hub_with_files, owner_client, language):
    owner_client.cookies["django_language"] = language
    page = owner_client.get("/marketplace/hub/", {"q": "gpucloud"}).content.decode()
    picker = owner_client.get("/marketplace/hub/search/", {"q": "qwen"}).content.decode()
    label = "仅有元数据" if language == "zh-hans" else "Metadata only"

    assert "gpucloud/console-zh-en" in page and "metadata-only" not in page
    assert "Qwen/" in picker and picker.count("metadata-only") == picker.count("<li ") > 0
    assert label in picker
    everything = owner_client.get("/marketplace/hub/", {"kind": "dataset"}).content.decode()
    assert everything.count("metadata-only") == everything.count('class="list-group-item hub-item"') - 2


def test_the_tiny_demo_model_is_in_the_hub_as_its_template_serves_it(hub_with_files):

    body = _download(Client(), f"/{tiny_model.REPO}/resolve/main/{tiny_model.FILE_NAME}")
    laid_out = Path(hub_with_files) / tiny_model.REPO / tiny_model.FILE_NAME

    assert HubItem.objects.get(repo=tiny_model.REPO).has_bytes and laid_out.read_bytes() == body
    model = NgramModel.load(laid_out)
    assert model.name == tiny_model.REPO and model.trained_on > 100_000
