"""`gpucloud images import|ls|show|rm` against a real HTTP server and the tests' registry."""

import io

import pytest

from accounts import services as console_services
from cli import marketplace as cli_marketplace
from cli.main import main
from marketplace.models import Image
from marketplace.tests.registry_fixtures import PASSWORD, USER

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys, owner):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = console_services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def run(*argv, stdin=""):
        monkeypatch.setattr(cli_marketplace.sys, "stdin", io.StringIO(stdin))
        code = main(["--url", live_server.url, "--lang", "en", "--token", token, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_import_with_a_password_from_stdin_then_show_ls_and_rm(cli, image_imports, tiny_image, eager_tasks):
    code, out, err = cli("images", "import", tiny_image, "--username", USER, "--password-stdin", stdin=PASSWORD + "\n")
    assert code == 0, err
    image = Image.objects.get()
    assert f"as {image.slug} (private)" in out
    code, out, _ = cli("images", "show", image.slug)
    assert "imported from: " + tiny_image in out and "shell yes" in out and "command: /bin/sh -c" in out
    code, out, _ = cli("images", "ls", "--mine")
    assert image.slug in out
    code, out, _ = cli("images", "rm", image.slug)
    assert code == 0 and not Image.objects.exists()


def test_a_password_from_stdin_needs_a_user(cli, image_imports):
    code, _out, err = cli("images", "import", "busybox", "--password-stdin", stdin="x")
    assert code != 0 and "--username" in err


def test_import_from_an_archive_in_cloud_storage(cli, owner, cloud_storage, image_imports):
    code, out, err = cli("images", "import", "--archive", "/nowhere.tar")
    assert code != 0 and "Nothing at" in err  # looked up in the caller's own storage
    code, _out, err = cli("images", "import")
    assert code != 0 and "--archive" in err
