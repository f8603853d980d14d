"""`gpucloud hub search` and `gpucloud hub show` against a real HTTP server."""

import json

import pytest

from cli.main import main

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))

    def run(*argv):
        code = main(["--url", live_server.url, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_hub_search_in_chinese_with_a_chip_filter_needs_no_login(cli, chat_models):
    code, out, _ = cli("hub", "search", "对话", "--chip", "npu", "--kind", "model")
    assert code == 0 and "THUDM/chatglm3-6b" in out and "thu-coai/lccc" not in out
    assert "REPO" in out and "1 of 1 shown" in out


def test_hub_search_as_json(cli, chat_models):
    code, out, _ = cli("--json", "hub", "search", "qwen 7b")
    assert code == 0 and [r["repo"] for r in json.loads(out)["results"]] == ["Qwen/Qwen2.5-7B-Instruct"]


def test_hub_show_prints_the_item_with_files(cli, make_item):
    make_item("THUDM/chatglm3-6b", size_bytes=12_500_000_000, files=[("config.json", 1_000)], chips=["npu"])
    code, out, _ = cli("hub", "show", "THUDM/chatglm3-6b")
    assert code == 0 and "repo: THUDM/chatglm3-6b" in out and "size: 12.5 GB" in out
    assert "config.json  1 KB" in out and "mount_path: /root/public/THUDM/chatglm3-6b" in out


def test_hub_show_of_a_missing_item_is_a_clear_error(cli, db):
    code, _, err = cli("hub", "show", "nobody/nothing")
    assert code == 1 and "404" in err and "nobody/nothing" in err
    code, _, err = cli("hub", "show", "not-a-repo")
    assert code == 1 and "ORG/NAME" in err
