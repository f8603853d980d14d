"""API fuzzing: schemathesis generates requests from the OpenAPI schema and sends them to the WSGI app in-process.

Every operation is tried with an owner's read-write token (an owner with an instance, a disk, files and a token,
so lists and lookups render real rows) and with no token at all. Whatever comes in — missing fields, wrong types,
huge numbers, odd unicode, random ids — the API must never answer 500, every error must be JSON in the
documented shape ``{"code", "message"[, "errors"]}``, and every answer must be what the schema says: a documented
status code, the documented content type, a body that validates against the documented schema. Requests are made
both from the schema (positive) and against it (negative), and every schemathesis check runs, those that judge the
data too: what the schema calls valid is accepted (or refused for the state it meets: 404, 409, a 402 or 429), and
what it calls invalid is refused. Where the schema names a format that a pattern cannot say (an ID number's check
digit, an SSH key, a storage name's bytes) the generator is taught that format here, from the code that checks it.
``FUZZ_EXAMPLES`` sets how many requests each operation gets (small by default, so the whole fuzz stays well
under three minutes on two cores).
"""

import base64
import json
import os
import unicodedata
import zoneinfo
from datetime import date

import jsonschema
import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ensure_resource_availability,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
    use_after_free,
)

from accounts import identity, services, ssh_keys, verification
from catalog.models import Zone
from config.wsgi import application
from core.time_zones import TIMEZONE_FORMAT
from instances import launching
from jobs.schedules import CRON_FORMAT, MACROS
from marketplace.images import references
from notifications.api.serializers import PUBLIC_URL_FORMAT
from storage import disks, paths
from storage.api.views import UPLOAD_METADATA_FORMAT
from storage.tests.fixtures import store_file
from tests.fixtures.factories import UserFactory, top_up
from tests.fixtures.openapi import read_pattern_properties

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))


@schemathesis.hook
def before_load_schema(ctx, raw_schema):
    """OpenAPI 3.0 has no keyword for an object's keys: the schema writes the rule for environment variable names
    as ``x-patternProperties``, which the generator is taught here, so that the names it makes are valid (and its
    invalid ones invalid)."""
    read_pattern_properties(raw_schema)


schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)

# tus answers a request without its "Tus-Resumable" header 412 Precondition Failed (the protocol says so), where
# schemathesis expects a 4xx of the usual kind for a missing required header.
schema.config.checks.missing_required_header.expected_statuses = ["400", "401", "403", "406", "412", "415", "422"]
# In the same way tus answers a wrong "Tus-Resumable" version 412, and an Upload-Length past the largest size it
# takes (its Tus-Max-Size) 413, which the negative-data check does not expect among its usual refusals (the rest of
# this list is its default).
schema.config.checks.negative_data_rejection.expected_statuses = [
    *("400", "401", "403", "404", "405", "406", "409", "412", "413", "415", "422", "428", "429", "5xx")
]

# tus upload endpoints speak the tus protocol (HEAD/PATCH with offsets): their protocol errors are tus responses
# with empty bodies, as tus clients expect, not JSON documents.
TUS_PROTOCOL_PATHS = {"/api/v1/storage/uploads/{public_id}/"}

FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


# The formats the schema names for what a pattern cannot say (a check character, a date of birth, a name's bytes):
# values of each, made by the rules of the code that checks them, so that the data the schema calls valid is.
def _storage_name():
    letters = st.characters(blacklist_categories=("Cc", "Cf", "Cs"), blacklist_characters="/\\")
    name = st.text(letters, min_size=1, max_size=40).map(lambda text: unicodedata.normalize("NFC", text).strip())
    return name.filter(lambda text: text not in {"", ".", ".."} and len(text.encode()) <= paths.MAX_NAME_BYTES)


def _storage_path():
    # With or without the leading "/": the API takes both from the root.
    lead = st.sampled_from(["/", ""])
    return st.tuples(lead, st.lists(_storage_name(), min_size=0, max_size=4)).map(
        lambda p: (p[0] + "/".join(p[1])) or "/"
    )


def _resident_id():
    def number(parts):
        region, born, sequence = parts
        first17 = f"{region:02d}0101{born:%Y%m%d}{sequence:03d}"
        return first17 + identity.check_character(first17)

    born = st.dates(min_value=date(1900, 1, 1), max_value=timezone.localdate())
    return st.tuples(st.sampled_from(sorted(identity.PROVINCES)), born, st.integers(0, 999)).map(number)


def _credit_code():
    first17 = st.text(st.sampled_from(verification.CREDIT_CODE_ALPHABET), min_size=17, max_size=17)
    return first17.map(lambda code: code + verification.credit_code_check_character(code))


def _ssh_public_key():
    def key(parts):
        point, comment = parts
        blob = b"".join(len(part).to_bytes(4, "big") + part for part in (b"ssh-ed25519", point))
        return f"ssh-ed25519 {base64.b64encode(blob).decode()} {comment}".strip()

    return st.tuples(st.binary(min_size=32, max_size=32), st.from_regex(r"[a-z0-9@.-]{0,20}", fullmatch=True)).map(key)


def _upload_metadata():
    def header(parts):
        filename, folder = parts
        return ",".join(
            f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in (("filename", filename), ("folder", folder))
        )

    return st.tuples(_storage_name(), _storage_path()).map(header)


def _image_reference():
    # Registries on private and loopback addresses only: the import refuses them (403) before any request, so the
    # fuzz never sends anything anywhere.
    registry = st.sampled_from(["127.0.0.1:5000", "10.0.0.7", "192.168.3.4:443"])
    component = st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True)
    tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
    return st.tuples(registry, component, component, tag).map(lambda p: f"{p[0]}/{p[1]}/{p[2]}:{p[3]}")


schemathesis.openapi.format(references.REFERENCE_FORMAT, _image_reference())
schemathesis.openapi.format(
    CRON_FORMAT,
    st.one_of(
        st.sampled_from(sorted(MACROS)),
        st.tuples(st.integers(0, 59), st.integers(0, 23)).map(lambda p: f"{p[0]} {p[1]} * * *"),
    ),
)
schemathesis.openapi.format(TIMEZONE_FORMAT, st.sampled_from(sorted(zoneinfo.available_timezones())))
schemathesis.openapi.format(paths.NAME_FORMAT, _storage_name())
schemathesis.openapi.format(paths.PATH_FORMAT, _storage_path())
schemathesis.openapi.format(identity.NUMBER_FORMAT, _resident_id())
schemathesis.openapi.format(verification.CREDIT_CODE_FORMAT, _credit_code())
schemathesis.openapi.format(ssh_keys.KEY_FORMAT, _ssh_public_key())
schemathesis.openapi.format(UPLOAD_METADATA_FORMAT, _upload_metadata())
# A notification channel's URL: https on a public address, written as a literal so that no name is looked up.
schemathesis.openapi.format(
    PUBLIC_URL_FORMAT,
    st.tuples(
        st.sampled_from(["93.184.215.14", "1.1.1.1", "203.119.0.1"]), st.from_regex(r"[a-z0-9]{0,12}", fullmatch=True)
    ).map(lambda parts: f"https://{parts[0]}/{parts[1]}"),
)


@schemathesis.serializer("application/offset+octet-stream")
def _tus_chunk(ctx, value):
    """A tus PATCH carries raw bytes; whatever the generator made is sent as bytes."""
    if isinstance(value, bytes):
        return value
    return str(value).encode()


@schemathesis.check
def error_is_documented_json(ctx, response, case):
    """Every 4xx/5xx answer is JSON ``{"code": str, "message": str[, "errors": ...]}``."""
    if response.status_code < 400:
        return None
    if case.path in TUS_PROTOCOL_PATHS and response.status_code in {404, 409, 410, 412, 413, 415, 460}:
        if not response.content:
            return None
    content_type = response.headers.get("content-type", [""])
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    assert content_type.startswith("application/json"), f"error {response.status_code} is {content_type!r}"
    body = json.loads(response.content)
    assert isinstance(body, dict), f"error body is not an object: {body!r}"
    assert isinstance(body.get("code"), str) and body["code"], f"no 'code' in {body!r}"
    assert isinstance(body.get("message"), str) and body["message"], f"no 'message' in {body!r}"
    assert set(body) <= {"code", "message", "errors"}, f"undocumented keys in {body!r}"
    return None


CHECKS = [
    not_a_server_error,
    error_is_documented_json,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    allow_header_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
    unsupported_method,
    use_after_free,
    ensure_resource_availability,
]


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """The WSGI app fires request_finished, which would close the test's database connection (and its
    transaction); Django's own test client detaches that handler in the same way."""

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_owner(db, catalog):
    """An owner with a read-write token and a little of everything, so list endpoints have rows to render."""

    user = UserFactory(email="fuzz-owner@example.com")
    _a_little_of_everything(user)
    return services.create_api_token(user, name="fuzz", scope="read_write").plaintext


def _a_little_of_everything(user):

    top_up(user, "1000")
    request = launching.LaunchRequest(name="fuzz-1", chip="ascend-910b", image="pytorch-2.2-cann8", cards=1)
    instance = launching.launch(user, request)
    disks.create(user, name="fuzz-disk", size_gb=10, zone=Zone.objects.get(pk=instance.zone_id))
    store_file(user, "/data/notes.txt", "你好".encode())


@schema.parametrize()
@FUZZ_SETTINGS
def test_the_api_never_answers_500_to_an_owner_and_errors_are_documented_json(case, fuzz_owner):
    case.call_and_validate(headers={"Authorization": f"Bearer {fuzz_owner}"}, checks=CHECKS)


@schema.parametrize()
@FUZZ_SETTINGS
def test_the_api_never_answers_500_without_a_token_and_errors_are_documented_json(case, db):
    case.call_and_validate(checks=CHECKS)


@pytest.mark.parametrize(
    ("flags", "code"),
    [
        ({"backend": "auto", "no_card": "on"}, "invalid_chip"),
        ({"chip": "ascend-910b", "spot": "yes", "plan": "monthly"}, "spot_not_offered"),
    ],
)
def test_a_form_launch_refused_for_a_flag_written_as_text_is_one_the_schema_calls_invalid(
    owner_api, catalog, flags, code
):
    # A form writes a flag as text ("on", "yes"): the server reads it as set, and so must the schema's rules across
    # fields, or a client checking its request against the schema sends one the server refuses.
    owner_api.raise_request_exception = False
    body = {"name": "flags", "image": "pytorch-2.2", **flags}
    validator = _form_launch_validator(owner_api)

    response = owner_api.post("/api/v1/instances/", body, HTTP_ACCEPT_LANGUAGE="en")

    assert (response.status_code, response.json()["code"]) == (400, code)
    assert not validator.is_valid(body)
    assert validator.is_valid({**body, **{k: "off" for k in ("no_card", "spot") if k in flags}})


def test_a_form_launch_with_spot_on_and_the_plan_left_empty_is_valid_as_the_server_reads_it(owner_api, catalog):
    # A form's empty plan is the default, pay-as-you-go, on which spot is offered.
    owner_api.raise_request_exception = False
    body = {"name": "spot", "image": "pytorch-2.2", "chip": "ascend-910b", "spot": "on", "plan": ""}

    response = owner_api.post("/api/v1/instances/", body, HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code != 400, response.json()
    assert _form_launch_validator(owner_api).is_valid(body)


def _form_launch_validator(api):
    document = api.get("/api/schema/?format=json").json()
    form = document["paths"]["/api/v1/instances/"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    return jsonschema.Draft7Validator({**form, "components": document["components"]})
