"""Secrets: encrypted at rest, written and deleted by their owner through the page, the API and the CLI, and never
shown again — not on a page, in the API, the admin or an error."""

import io
import sys
from argparse import Namespace

import pytest
from django.db import connection
from django.urls import reverse
from django.views.debug import ExceptionReporter

from accounts import services as console_services
from cli.main import main
from cli.secrets import read_value
from core import encryption
from core.encryption import DecryptionError, decrypt, encrypt
from core.errors import Conflict, NotFound
from core.field_errors import FieldError
from instances import secrets
from instances.models import Secret

pytestmark = pytest.mark.django_db

VALUE = "hf_S3cr3t-VALUE-7f9c"
URL = "/api/v1/secrets"


def _column(secret) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT value_encrypted FROM instances_secret WHERE id = %s", [secret.pk])
        return cursor.fetchone()[0]


def test_a_secret_is_encrypted_at_rest_and_read_back_only_for_booting(owner):
    secret, created = secrets.put_secret(owner, "HF_TOKEN", VALUE)

    stored = _column(secret)
    assert created and VALUE not in stored and "S3cr3t" not in stored
    assert decrypt(stored) == VALUE
    assert secrets.secret_values(owner.pk, ["HF_TOKEN", "MISSING"]) == {"HF_TOKEN": VALUE}
    assert VALUE not in str(secret) and VALUE not in repr(secret)


def test_the_same_value_encrypts_differently_each_time():
    assert encrypt(VALUE) != encrypt(VALUE)


def test_secrets_survive_a_key_rotation_that_keeps_the_old_key_as_a_fallback(owner, settings):
    secret, _ = secrets.put_secret(owner, "HF_TOKEN", VALUE)
    old_key = settings.SECRET_KEY

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-key-" + "x" * 50, [old_key]
    assert secrets.secret_values(owner.pk, ["HF_TOKEN"]) == {"HF_TOKEN": VALUE}

    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(DecryptionError):
        decrypt(_column(secret))
    # A value no key opens is left out of the boot, like a deleted one, instead of failing it.
    assert secrets.secret_values(owner.pk, ["HF_TOKEN"]) == {}


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("1ABC", "invalid_variable_name"),
        ("A-B", "invalid_variable_name"),
        ("", "invalid_variable_name"),
        ("名字", "invalid_variable_name"),
        ("A" * 65, "invalid_variable_name"),
        ("HOME", "reserved_variable_name"),
        ("PATH", "reserved_variable_name"),
        ("GPUCLOUD_AGENT_TOKEN", "reserved_variable_name"),
        ("JUPYTER_TOKEN", "reserved_variable_name"),
        ("CUDA_VISIBLE_DEVICES", "reserved_variable_name"),
    ],
)
def test_secret_names_follow_the_environment_variable_rule(owner, name, code):
    with pytest.raises(FieldError) as refused:
        secrets.put_secret(owner, name, VALUE)
    assert refused.value.field == "name" and refused.value.code == code
    assert not Secret.objects.exists()


@pytest.mark.parametrize("value", ["", "a\x00b", "x" * (32 * 1024 + 1)])
def test_a_value_must_be_non_empty_text_without_nul_of_at_most_32_kb(owner, value):
    with pytest.raises(FieldError) as refused:
        secrets.put_secret(owner, "TOKEN", value)
    assert refused.value.field == "value"


def test_create_refuses_a_name_in_use_and_put_replaces_the_value(owner):
    secrets.create_secret(owner, "TOKEN", "one")
    with pytest.raises(Conflict):
        secrets.create_secret(owner, "TOKEN", "two")
    secret, created = secrets.put_secret(owner, "TOKEN", "two")
    assert not created and secrets.secret_values(owner.pk, ["TOKEN"]) == {"TOKEN": "two"}


def test_a_user_may_keep_a_bounded_number_of_secrets(owner, monkeypatch):
    monkeypatch.setattr(secrets, "MAX_SECRETS_PER_USER", 2)
    secrets.put_secret(owner, "A", "1")
    secrets.put_secret(owner, "B", "2")
    with pytest.raises(Exception, match="at most 2 secrets"):
        secrets.put_secret(owner, "C", "3")
    secrets.put_secret(owner, "B", "changed")  # replacing is not adding


def test_another_users_secret_is_not_found(owner, stranger):
    secrets.put_secret(owner, "TOKEN", VALUE)
    with pytest.raises(NotFound):
        secrets.get_secret(stranger, "TOKEN")
    with pytest.raises(NotFound):
        secrets.delete_secret(stranger, "TOKEN")
    assert secrets.secret_values(stranger.pk, ["TOKEN"]) == {}


# The API ----------------------------------------------------------------------------------------------------------


def test_the_api_saves_lists_replaces_and_deletes_without_ever_returning_a_value(owner, owner_api):
    created = owner_api.post(URL, {"name": "HF_TOKEN", "value": VALUE}, format="json")
    assert created.status_code == 201, created.json()
    assert set(created.json()) == {"name", "created_at", "updated_at"}

    listed = owner_api.get(URL)
    detail = owner_api.get(f"{URL}/HF_TOKEN")
    replaced = owner_api.put(f"{URL}/HF_TOKEN", {"value": VALUE + "-2"}, format="json")
    made = owner_api.put(f"{URL}/OTHER", {"value": VALUE + "-3"}, format="json")
    assert [s["name"] for s in listed.json()["results"]] == ["HF_TOKEN"]
    assert detail.status_code == 200 and replaced.status_code == 200 and made.status_code == 201
    for response in (created, listed, detail, replaced, made):
        assert b"S3cr3t" not in response.content
    assert secrets.secret_values(owner.pk, ["HF_TOKEN"]) == {"HF_TOKEN": VALUE + "-2"}

    assert owner_api.delete(f"{URL}/HF_TOKEN").status_code == 204
    assert owner_api.get(f"{URL}/HF_TOKEN").status_code == 404


def test_a_name_in_use_is_a_409_and_bad_input_names_its_field(owner_api):
    owner_api.post(URL, {"name": "TOKEN", "value": "1"}, format="json")
    taken = owner_api.post(URL, {"name": "TOKEN", "value": "2"}, format="json")
    assert taken.status_code == 409 and taken.json()["code"] == "secret_exists"

    for body, field in (
        ({"name": "HOME", "value": "x"}, "name"),
        ({"name": "9LIVES", "value": "x"}, "name"),
        ({"name": "OK_NAME", "value": ""}, "value"),
        ({"name": "OK_NAME", "value": "a\x00b"}, "value"),
        ({"name": "OK_NAME"}, "value"),
    ):
        response = owner_api.post(URL, body, format="json", HTTP_ACCEPT_LANGUAGE="en")
        assert response.status_code == 400, (body, response.json())
        assert field in response.json()["errors"], (body, response.json())
    refused = owner_api.put(f"{URL}/GPUCLOUD_X", {"value": "x"}, format="json")
    assert refused.status_code == 400 and "name" in refused.json()["errors"]


def test_errors_are_in_chinese_for_a_chinese_client(owner_api):
    response = owner_api.post(URL, {"name": "HOME", "value": "x"}, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 400 and "平台" in response.json()["message"]


def test_strangers_and_read_only_tokens_cannot_touch_the_owners_secrets(owner, owner_api, stranger_api, teammate_api):
    owner_api.post(URL, {"name": "TOKEN", "value": VALUE}, format="json")
    assert stranger_api.get(f"{URL}/TOKEN").status_code == 404
    assert stranger_api.delete(f"{URL}/TOKEN").status_code == 404
    assert stranger_api.get(URL).json()["results"] == []
    assert teammate_api.post(URL, {"name": "X", "value": "1"}, format="json").status_code == 403
    assert teammate_api.delete(f"{URL}/TOKEN").status_code == 403
    # A stranger's PUT makes the stranger's own secret of that name; the owner's is untouched.
    assert stranger_api.put(f"{URL}/TOKEN", {"value": "theirs"}, format="json").status_code == 201
    assert secrets.secret_values(owner.pk, ["TOKEN"]) == {"TOKEN": VALUE}


# The page ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def english(owner_client, settings):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def test_the_page_adds_replaces_and_deletes_and_never_shows_a_value(english, owner):
    page = reverse("instances:secrets")
    added = english.post(page, {"name": "HF_TOKEN", "value": VALUE})
    html = added.content.decode()
    assert added.status_code == 200 and "Secret HF_TOKEN saved" in html and "S3cr3t" not in html
    assert "<code>HF_TOKEN</code>" in english.get(page).content.decode()

    replaced = english.post(reverse("instances:secret-replace", args=["HF_TOKEN"]), {"value": "line1\r\nline2"})
    assert replaced.status_code == 200 and "line1" not in replaced.content.decode()
    assert secrets.secret_values(owner.pk, ["HF_TOKEN"]) == {"HF_TOKEN": "line1\nline2"}  # a pasted key keeps LF

    deleted = english.post(reverse("instances:secret-delete", args=["HF_TOKEN"]))
    assert deleted.status_code == 302 and not Secret.objects.exists()


def test_a_refused_secret_shows_the_reason_and_not_the_value(english):
    response = english.post(reverse("instances:secrets"), {"name": "GPUCLOUD_TOKEN", "value": VALUE})
    html = response.content.decode()
    assert response.status_code == 400 and "is set by the platform" in html
    assert "S3cr3t" not in html and not Secret.objects.exists()


def test_the_page_and_its_forms_404_for_another_users_secret(owner, stranger, client):
    secrets.put_secret(owner, "OWNERS_KEY", VALUE)
    client.force_login(stranger)
    assert "OWNERS_KEY" not in client.get(reverse("instances:secrets")).content.decode()
    assert client.post(reverse("instances:secret-replace", args=["OWNERS_KEY"]), {"value": "x"}).status_code == 404
    assert client.post(reverse("instances:secret-delete", args=["OWNERS_KEY"])).status_code == 404
    assert secrets.secret_values(owner.pk, ["OWNERS_KEY"]) == {"OWNERS_KEY": VALUE}


def test_the_admin_shows_names_with_the_value_masked(admin_client, owner):
    secret, _ = secrets.put_secret(owner, "HF_TOKEN", VALUE)
    changelist = admin_client.get(reverse("admin:instances_secret_changelist"))
    change = admin_client.get(reverse("admin:instances_secret_change", args=[secret.pk]))
    assert changelist.status_code == 200 and change.status_code == 200
    for response in (changelist, change):
        html = response.content.decode()
        assert "HF_TOKEN" in html and "S3cr3t" not in html and _column(secret) not in html
    assert "••••••••" in change.content.decode()
    assert admin_client.get(reverse("admin:instances_secret_add")).status_code == 403


# The CLI ----------------------------------------------------------------------------------------------------------


def test_the_cli_reads_the_value_from_stdin_without_its_last_line_end():

    piped = io.StringIO("token-from-a-file\n")
    assert read_value(Namespace(value=None, name="X"), stdin=piped) == "token-from-a-file"
    assert read_value(Namespace(value="given", name="X"), stdin=piped) == "given"


@pytest.mark.django_db(transaction=True)
def test_the_cli_sets_lists_and_removes_secrets(live_server, owner, tmp_path, monkeypatch, capsys):

    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = console_services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def cli(*argv, stdin=""):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(["--url", live_server.url, "--lang", "en", "--token", token, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    assert cli("secrets", "set", "HF_TOKEN", stdin=VALUE + "\n")[0] == 0
    code, out, _ = cli("secrets", "list")
    assert code == 0 and "HF_TOKEN" in out and "S3cr3t" not in out
    assert secrets.secret_values(owner.pk, ["HF_TOKEN"]) == {"HF_TOKEN": VALUE}
    code, _, err = cli("secrets", "set", "HOME", "--value", "x")
    assert code == 1 and "HOME is set by the platform" in err
    assert cli("secrets", "rm", "HF_TOKEN")[0] == 0
    code, _, err = cli("secrets", "rm", "HF_TOKEN")
    assert code == 1 and "404" in err


def test_an_error_report_shows_a_secret_value_as_stars(owner, monkeypatch, rf):

    def key_store_down():
        raise RuntimeError("the key store is down")

    monkeypatch.setattr(encryption, "_fernet", key_store_down)
    try:
        secrets.put_secret(owner, "HF_TOKEN", VALUE)
    except RuntimeError:
        frames = ExceptionReporter(rf.get("/"), *sys.exc_info()).get_traceback_data()["frames"]
    shown = {frame["function"]: dict(frame["vars"]) for frame in frames}
    assert {"put_secret", "encrypt"} <= set(shown) and "S3cr3t" not in str(shown)
    assert "*" in shown["put_secret"]["value"] and "*" in shown["encrypt"]["plaintext"]
