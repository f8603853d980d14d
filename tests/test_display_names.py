"""One rule for every name a user gives an object (instance, disk, image, API token): control characters and the
characters that reverse or isolate text direction are refused with the same message everywhere, and nothing is
written. Storage file names follow the stricter file-name rule (storage/paths.py)."""

import pytest

from accounts.models import ApiToken
from catalog.models import Zone
from core.errors import ServiceError
from core.validators import clean_display_name
from inference.tests.fixtures import fund
from instances.models import Instance
from marketplace.models import Image
from storage import disks
from storage.models import CloudDisk

pytestmark = pytest.mark.django_db

REFUSED = [
    "\u0000",
    "\u0007",
    "\n",
    "\u001f",
    "\u007f",
    "\u0085",
    "\u009f",
    "\u202a",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u2028",
]


@pytest.mark.parametrize("char", REFUSED)
def test_the_rule_refuses_control_and_text_direction_characters_anywhere_in_a_name(char):
    with pytest.raises(ServiceError) as refused:
        clean_display_name(f"train{char}gpj.exe", max_length=64, field_label="instance")
    assert refused.value.code == "invalid_name"
    assert refused.value.message == (
        f"The instance name cannot contain control or text-direction characters (found U+{ord(char):04X})."
    )


def test_the_rule_trims_normalises_and_keeps_ordinary_names():
    assert clean_display_name("  训练-1 café ", max_length=64, field_label="disk") == "训练-1 café"
    assert clean_display_name("cafe\u0301", max_length=64, field_label="disk") == "caf\u00e9"  # one name, NFC
    assert clean_display_name("👩\u200d💻 llama", max_length=64, field_label="disk") == "👩\u200d💻 llama"  # emoji ZWJ
    for bad in ["", "   ", None, 5, "x" * 65]:
        with pytest.raises(ServiceError, match="Give the disk a name of 1 to 64 characters."):
            clean_display_name(bad, max_length=64, field_label="disk")


@pytest.mark.parametrize("char", ["\u202e", "\u0007", "\u0085"])
def test_an_instance_name_with_a_control_character_is_a_400_and_launches_nothing(owner_api, lifecycle, char):
    body = {"name": f"job{char}1", "image": "pytorch-2.2-neuware", "backend": "mlu"}

    response = owner_api.post("/api/v1/instances", body, format="json", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_name" and "text-direction" in response.json()["message"]
    assert not Instance.objects.exists()


@pytest.mark.parametrize("char", ["\u202e", "\u0085", "\u2066"])
def test_a_disk_name_with_a_control_character_is_refused_and_creates_nothing(owner, catalog, char):
    fund(owner, "100")
    zone = Zone.objects.get(slug="cn-east-xc")
    with pytest.raises(ServiceError) as refused:
        disks.create(owner, name=f"data{char}", size_gb=10, zone=zone)
    assert refused.value.code == "invalid_name" and "text-direction" in str(refused.value.message)
    assert not CloudDisk.objects.exists()


def test_a_disk_name_still_cannot_hold_a_slash(owner, catalog):
    with pytest.raises(ServiceError, match="without “/”"):
        disks.create(owner, name="a/b", size_gb=10, zone=Zone.objects.get(slug="cn-east-xc"))


def test_an_image_name_with_a_text_direction_character_is_a_400_and_clones_nothing(owner_api, official_images):
    images = Image.objects.count()

    response = owner_api.post(
        "/api/v1/images/vllm-0.6/clone",
        {"target": "my_images", "name": "vllm\u202egnp.exe"},
        format="json",
        HTTP_ACCEPT_LANGUAGE="en",
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_name" and "text-direction" in response.json()["message"]
    assert Image.objects.count() == images


@pytest.mark.parametrize("char", ["\u202e", "\u0007", "\u001b", "\u0085"])
def test_an_api_token_name_with_a_control_character_is_a_400_and_issues_nothing(owner_api, char):
    tokens = ApiToken.objects.count()

    response = owner_api.post(
        "/api/v1/tokens", {"name": f"ci{char}bot", "scope": "read"}, format="json", HTTP_ACCEPT_LANGUAGE="en"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_name" and "text-direction" in response.json()["message"]
    assert ApiToken.objects.count() == tokens
