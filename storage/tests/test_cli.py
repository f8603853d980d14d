"""`gpucloud cp`, `storage ls`, `storage rm` against a real HTTP server."""

import hashlib
import os

import pytest

from accounts import services as console_services
from cli import storage as storage_cli
from cli.main import main
from storage.models import Entry, Upload

from .fixtures import MB

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, owner, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = console_services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def run(*argv):
        code = main(["--url", live_server.url, "--token", token, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_cp_uploads_and_downloads_a_file_round_trip(cli, owner, tmp_path, monkeypatch):
    monkeypatch.setattr(storage_cli, "CHUNK_BYTES", MB)
    data = os.urandom(3 * MB + 7)
    local = tmp_path / "权重 shard.bin"
    local.write_bytes(data)

    code, out, err = cli("cp", str(local), "remote:/models/")
    assert code == 1 and "404" in err  # the folder does not exist yet
    assert cli("storage", "mkdir", "/models")[0] == 0
    code, out, err = cli("cp", str(local), "remote:/models/")
    assert code == 0, err
    assert "100.0%" in out and "remote:/models/权重 shard.bin" in out
    entry = Entry.objects.get(owner=owner, path="/models/权重 shard.bin")
    assert entry.checksum == hashlib.sha256(data).hexdigest()

    code, out, _ = cli("storage", "ls", "/models")
    assert code == 0 and "权重 shard.bin" in out and "3.0 MB" in out

    back = tmp_path / "back.bin"
    code, out, err = cli("cp", "remote:/models/权重 shard.bin", str(back))
    assert code == 0, err
    assert back.read_bytes() == data

    code, out, _ = cli("storage", "rm", "/models/权重 shard.bin")
    assert code == 0 and not Entry.objects.filter(pk=entry.pk).exists()


def test_rerunning_an_interrupted_cp_continues_where_it_stopped(cli, owner, tmp_path, monkeypatch):
    monkeypatch.setattr(storage_cli, "CHUNK_BYTES", MB)
    data = os.urandom(4 * MB)
    local = tmp_path / "data.bin"
    local.write_bytes(data)
    real_send, sent_offsets = storage_cli.send_chunk, []

    def flaky(api, url, offset, chunk):
        sent_offsets.append(offset)
        if len(sent_offsets) == 3:
            raise storage_cli.CliError("cannot reach the console: connection reset")
        return real_send(api, url, offset, chunk)

    monkeypatch.setattr(storage_cli, "send_chunk", flaky)
    code, _, err = cli("cp", str(local), "remote:/data.bin")
    assert code == 1 and "connection reset" in err
    assert Upload.objects.get().offset == 2 * MB

    sent_offsets.clear()
    code, out, err = cli("cp", str(local), "remote:/data.bin")

    assert code == 0, err
    assert "resuming data.bin at 2.0 MB" in out
    assert sent_offsets == [2 * MB, 3 * MB]  # only the rest was sent
    assert Entry.objects.get(owner=owner, path="/data.bin").checksum == hashlib.sha256(data).hexdigest()


def test_over_quota_cp_is_refused_with_the_servers_message(cli, settings, tmp_path):
    settings.STORAGE_MAX_GB = 1 / 1024
    local = tmp_path / "big.bin"
    local.write_bytes(b"x" * (2 * MB))
    code, _, err = cli("cp", str(local), "remote:/")
    assert code == 1 and "413" in err and "Not enough storage space" in err


def test_rm_refuses_a_folder_without_r(cli):
    cli("storage", "mkdir", "/keep")
    code, _, err = cli("storage", "rm", "/keep")
    assert code == 1 and "use -r" in err
    assert cli("storage", "rm", "-r", "/keep")[0] == 0


def test_cp_needs_exactly_one_remote_side(cli):
    code, _, err = cli("cp", "a", "b")
    assert code == 1 and "remote:" in err
