"""`gpucloud images ls|show|clone` against a real HTTP server."""

import json

import pytest

from accounts import services as console_services
from cli.main import main
from instances.models import Instance
from marketplace.models import Image

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))

    def run(*argv, user=None):
        token = []
        if user:
            token = ["--token", console_services.create_api_token(user, name="cli", scope="read_write").plaintext]
        code = main(["--url", live_server.url, "--lang", "en", *token, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_images_ls_searches_and_filters_without_logging_in(cli, official_images):
    code, out, _ = cli("images", "ls", "昇腾", "--category", "xinchuang")
    assert code == 0 and "mindspore-2.3" in out and "SLUG" in out and "vllm-0.6" not in out
    code, out, _ = cli("--json", "images", "ls", "--backend", "dcu")
    assert {r["slug"] for r in json.loads(out)["results"]} >= {"pytorch-2.2", "case-176b-pretrain-dcu"}


def test_images_show_prints_variants_and_live_prices(cli, official_images):
    code, out, _ = cli("images", "show", "pytorch-2.2")
    assert code == 0 and "variant npu: pytorch-2.2-cann8 on Ubuntu 22.04" in out
    assert "runs on npu: from ¥1.71/card-hour on Ascend 910B" in out
    code, _, err = cli("images", "show", "nothing-here")
    assert code == 1 and "404" in err


def test_images_clone_launches_or_copies(cli, owner, lifecycle):
    code, out, err = cli("images", "clone", "mindspore-2.3", "--name", "from-cli", user=owner)
    assert code == 0, err
    instance = Instance.objects.get(name="from-cli")
    assert "launched from-cli" in out and instance.chip.slug == "ascend-910b"
    code, out, _ = cli("images", "clone", "vllm-0.6", "--mine", user=owner)
    assert code == 0 and "cloned into your images" in out and Image.objects.filter(owner=owner).count() == 1
