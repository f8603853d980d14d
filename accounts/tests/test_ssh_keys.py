"""SSH keys: checked with asyncssh, one per fingerprint and at most 20 per user, owned; the page and the API."""

import asyncssh
import pytest
from django.conf import settings
from django.urls import reverse

from accounts import ssh_keys
from accounts.models import SSHKey
from core.errors import ServiceError

pytestmark = pytest.mark.django_db


def public_key(kind="ssh-ed25519", comment="me@laptop", **options) -> str:
    key = asyncssh.generate_private_key(kind, comment=comment, **options)
    return key.export_public_key().decode()


@pytest.fixture(scope="module")
def rsa_1024():
    return public_key("ssh-rsa", key_size=1024)


@pytest.fixture
def english(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


# The rules --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, options",
    [("ssh-ed25519", {}), ("ecdsa-sha2-nistp256", {}), ("ecdsa-sha2-nistp521", {}), ("ssh-rsa", {"key_size": 2048})],
)
def test_ed25519_ecdsa_and_rsa_keys_are_accepted_with_their_fingerprint(owner, kind, options):
    text = public_key(kind, **options)
    key = ssh_keys.add_ssh_key(owner, public_key=f"  {text}\n")
    assert key.key_type == kind and key.name == "me@laptop"
    assert key.fingerprint == asyncssh.import_public_key(text).get_fingerprint("sha256")
    assert key.fingerprint.startswith("SHA256:") and key.public_key == text.strip()


def test_a_name_given_wins_over_the_comment_and_a_key_without_one_is_named_by_its_type(owner):
    assert ssh_keys.add_ssh_key(owner, public_key=public_key(), name=" work ").name == "work"
    assert ssh_keys.add_ssh_key(owner, public_key=public_key(comment="")).name == "ssh-ed25519"


def test_a_private_key_is_refused_with_a_warning_never_to_share_it(owner):
    private = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    with pytest.raises(ServiceError) as refused:
        ssh_keys.add_ssh_key(owner, public_key=private)
    assert refused.value.code == "private_key"
    assert "PRIVATE key" in str(refused.value.message) and "Never share it" in str(refused.value.message)
    assert not SSHKey.objects.exists()


@pytest.mark.parametrize(
    "text, code",
    [
        ("", "key_required"),
        ("hello", "invalid_key"),
        ("ssh-ed25519 AAAAnot-base64!!", "invalid_key"),
        ("x" * 20_000, "invalid_key"),
        (None, "key_required"),
    ],
)
def test_garbage_is_refused(owner, text, code):
    with pytest.raises(ServiceError) as refused:
        ssh_keys.add_ssh_key(owner, public_key=text)
    assert refused.value.code == code


def test_short_rsa_keys_and_several_keys_at_once_are_refused(owner, rsa_1024):
    with pytest.raises(ServiceError, match="1024 bits"):
        ssh_keys.add_ssh_key(owner, public_key=rsa_1024)
    with pytest.raises(ServiceError, match="one public key at a time"):
        ssh_keys.add_ssh_key(owner, public_key=public_key() + public_key())


def test_the_same_key_twice_is_refused_but_another_user_may_add_it(owner, stranger):
    text = public_key()
    ssh_keys.add_ssh_key(owner, public_key=text)
    with pytest.raises(ServiceError, match="already added"):
        ssh_keys.add_ssh_key(owner, public_key=text, name="again")
    assert ssh_keys.add_ssh_key(stranger, public_key=text).user == stranger


def test_at_most_twenty_keys_per_user(owner):
    for _ in range(ssh_keys.MAX_SSH_KEYS_PER_USER):
        ssh_keys.add_ssh_key(owner, public_key=public_key())
    with pytest.raises(ServiceError, match="at most 20"):
        ssh_keys.add_ssh_key(owner, public_key=public_key())


def test_the_name_follows_the_display_name_rule(owner):
    with pytest.raises(ServiceError, match="control or text-direction"):
        ssh_keys.add_ssh_key(owner, public_key=public_key(), name="laptop\u202egpj.exe")


def test_only_the_owner_can_remove_a_key(owner, stranger):
    key = ssh_keys.add_ssh_key(owner, public_key=public_key())
    with pytest.raises(ServiceError) as refused:
        ssh_keys.remove_ssh_key(stranger, key.public_id)
    assert refused.value.status == 404
    ssh_keys.remove_ssh_key(owner, key.public_id)
    assert not SSHKey.objects.exists()


# The page ---------------------------------------------------------------------------------------------------


def test_the_page_adds_lists_and_deletes_keys(english, owner):
    url = reverse("console:ssh-keys")
    assert "No SSH keys yet" in english.get(url).content.decode()
    response = english.post(url, {"public_key": public_key(comment="desk")}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    key = SSHKey.objects.get(user=owner)
    assert response.status_code == 200 and "<html" not in html
    assert "desk" in html and key.fingerprint in html and 'id="ssh-key-added"' in html
    response = english.post(reverse("console:delete-ssh-key", args=[key.public_id]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "No SSH keys yet" in response.content.decode()
    assert not SSHKey.objects.exists()


def test_the_page_explains_a_pasted_private_key_in_chinese_and_english(owner_client):
    private = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    response = owner_client.post(reverse("console:ssh-keys"), {"public_key": private})
    assert response.status_code == 400 and "私钥" in response.content.decode()
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    response = owner_client.post(reverse("console:ssh-keys"), {"public_key": private})
    assert response.status_code == 400 and "This is a PRIVATE key" in response.content.decode()


def test_the_page_shows_a_bad_name_beside_the_name(english):
    response = english.post(reverse("console:ssh-keys"), {"public_key": public_key(), "name": "a\x07b"})
    assert response.status_code == 400
    assert "control or text-direction" in response.content.decode() and not SSHKey.objects.exists()


def test_the_page_lists_only_the_users_own_keys_and_a_stranger_cannot_delete_one(client, owner, stranger):
    key = ssh_keys.add_ssh_key(owner, public_key=public_key(comment="owners-key"))
    client.force_login(stranger)
    assert "owners-key" not in client.get(reverse("console:ssh-keys")).content.decode()
    assert client.post(reverse("console:delete-ssh-key", args=[key.public_id])).status_code == 404
    assert SSHKey.objects.filter(pk=key.pk).exists()


def test_the_account_menu_links_the_page(english):
    assert reverse("console:ssh-keys") in english.get(reverse("console:dashboard")).content.decode()


def test_the_page_needs_a_login(client):
    assert client.get(reverse("console:ssh-keys")).status_code == 302


# The API ----------------------------------------------------------------------------------------------------


def test_keys_are_added_listed_and_deleted_through_the_api(owner_api):
    created = owner_api.post("/api/v1/ssh-keys", {"public_key": public_key(comment="ci")}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["name"] == "ci" and body["key_type"] == "ssh-ed25519" and body["fingerprint"].startswith("SHA256:")
    listed = owner_api.get("/api/v1/ssh-keys").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == body["id"]
    assert owner_api.delete(f"/api/v1/ssh-keys/{body['id']}").status_code == 204
    assert owner_api.get("/api/v1/ssh-keys").json()["count"] == 0


def test_a_private_key_through_the_api_is_a_400_naming_the_field(owner_api):
    private = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    response = owner_api.post("/api/v1/ssh-keys", {"public_key": private}, format="json", HTTP_ACCEPT_LANGUAGE="en")
    body = response.json()
    assert response.status_code == 400 and body["code"] == "private_key"
    assert "PRIVATE key" in body["message"] and "public_key" in body["errors"]


@pytest.mark.parametrize(
    "payload", [{}, {"public_key": "nonsense"}, {"public_key": ["a"]}, {"public_key": "x" * 17_000}]
)
def test_bad_api_input_is_a_400_in_the_error_shape(owner_api, payload):
    response = owner_api.post("/api/v1/ssh-keys", payload, format="json")
    body = response.json()
    assert response.status_code == 400 and body["code"] in {"invalid", "invalid_key"} and body["message"]


def test_a_stranger_can_neither_see_nor_delete_the_owners_key(owner, stranger_api):
    key = ssh_keys.add_ssh_key(owner, public_key=public_key(comment="secret-laptop"))
    assert stranger_api.get(f"/api/v1/ssh-keys/{key.public_id}").status_code == 404
    assert stranger_api.delete(f"/api/v1/ssh-keys/{key.public_id}").status_code == 404
    assert "secret-laptop" not in str(stranger_api.get("/api/v1/ssh-keys").json())
    assert SSHKey.objects.filter(pk=key.pk).exists()


def test_a_read_only_token_cannot_add_or_delete_keys(owner, teammate_api):
    assert teammate_api.post("/api/v1/ssh-keys", {"public_key": public_key()}, format="json").status_code == 403
    assert teammate_api.get("/api/v1/ssh-keys").status_code == 200
