"""The OpenAPI schema's error answers, documented once for every operation.

Every API error is JSON ``{"code", "message"[, "errors"]}`` (``core.api.errors``), and some answers can come from
any operation whatever its view says: a malformed body or query (400), a missing or invalid token (401), a
read-only token on a write or a missing permission (403), an object that is not there or not the caller's (404,
or a named object such as a folder path, a chip or a zone), a write that conflicts with the object's state or
another object's name (409), a body over the size limit (413) and the per-user throttle (429). This
drf-spectacular hook adds those to each operation that does not document them itself, so the schema says what the
API answers.
"""

from django.core import validators
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import BooleanField

ERROR_COMPONENT = "Error"
ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "A stable machine-readable code, e.g. `not_found`."},
        "message": {"type": "string", "description": "What went wrong, in the request's language."},
        "errors": {"description": "Per-field messages, when the input had field errors."},
    },
    "required": ["code", "message"],
}

ANSWERS_OF_EVERY_OPERATION = {
    "400": "Malformed input: the message (and `errors`, per field) says what to change.",
    "401": "No token, or an invalid, expired or revoked one.",
    "403": "The token or account may not do this (e.g. a read-only token on a write).",
    "413": "The request body is over the size limit.",
    "429": "Too many requests: slow down and retry after the `Retry-After` seconds.",
    "404": "No such object (in the path, the query or the body), or not yours.",
}
ANSWER_OF_WRITES = ("409", "The object's state, or another object's name, does not allow this now.")
WRITES = {"post", "put", "patch", "delete"}
# The tus upload endpoints refuse a request without the protocol's version header; the upload resource itself
# answers its other protocol errors with empty bodies, as tus clients expect.
TUS_PATHS = {"/api/v1/storage/uploads/", "/api/v1/storage/uploads/{public_id}/"}
TUS_VERSION_ANSWER = ("412", "The request lacks the tus protocol's `Tus-Resumable: 1.0.0` header.")
EMPTY_BODY_PATHS = {"/api/v1/storage/uploads/{public_id}/"}


EMPTY_VALUE = {"type": "string", "maxLength": 0}
EMPTY_MEANS_ABSENT = "An empty value is the same as leaving the parameter out."


def _accepts_empty_text(schema: dict) -> bool:
    """Whether ``schema`` already lets the empty string through (a plain string with no rule on it)."""
    rules = {"minLength", "pattern", "format", "enum", "$ref", "oneOf", "anyOf", "allOf"}
    return schema.get("type") == "string" and not (rules & set(schema)) and not schema.get("minLength")


def document_empty_query_values(result, generator, request, public):
    """The API reads an optional query parameter sent empty (``?sort=``) as absent, as HTML forms send an unset
    field: DRF's serializers and the pagination do so. Each optional query parameter's schema says so — its own
    rule, or the empty string — so that a client knows ``?month=`` is accepted (and means this month)."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method.startswith("x-") or not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                if parameter.get("in") != "query" or parameter.get("required"):
                    continue
                schema = parameter.get("schema", {})
                if _accepts_empty_text(schema) or schema.get("type") == "array":
                    continue
                parameter["schema"] = {"anyOf": [schema, dict(EMPTY_VALUE)]}
                described = parameter.get("description", "")
                parameter["description"] = f"{described} {EMPTY_MEANS_ABSENT}".strip()
    return result


def _error(description: str, *, empty: bool) -> dict:
    if empty:
        return {"description": description}
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}}},
    }


def document_errors(result, generator, request, public):
    """Add the error answers that any operation can give to every operation that leaves them out."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault(ERROR_COMPONENT, ERROR_SCHEMA)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if method.startswith("x-") or not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            if path in TUS_PATHS:
                status, description = TUS_VERSION_ANSWER
                responses[status] = _error(description, empty=False)
            answers = dict(ANSWERS_OF_EVERY_OPERATION)
            if method in WRITES:
                answers.setdefault(*ANSWER_OF_WRITES)
            for status, description in answers.items():
                responses.setdefault(status, _error(description, empty=path in EMPTY_BODY_PATHS))
    return result


FORM_MEDIA_TYPES = {"application/x-www-form-urlencoded", "multipart/form-data"}


# How DRF reads a boolean written as text (``BooleanField.TRUE_VALUES`` and ``FALSE_VALUES``).
FORM_BOOLEANS = sorted({str(v) for v in (*BooleanField.TRUE_VALUES, *BooleanField.FALSE_VALUES) if isinstance(v, str)})

# A flag that is set, as a request may write it: the JSON value, or the text a form or a query string sends for it
# (DRF reads them alike). A rule across fields that asks whether a flag is set names them all, or a form's "on"
# would pass a rule that the server then applies.
FLAG_SET = {"anyOf": [{"enum": [True]}, {"enum": sorted(v for v in BooleanField.TRUE_VALUES if isinstance(v, str))}]}


def _empty_means_absent(prop: dict, required: bool) -> bool:
    # A named format's values are its own to say (a generator draws them from the format, which an alternative
    # beside it in an anyOf would hide): a form leaves such a field out to mean its default.
    if prop.get("format") in NAMED_FORMATS and not prop.get("nullable"):
        return False
    return prop.get("nullable") or (not required and not _accepts_empty_text(prop) and prop.get("type") != "array")


def _needs_a_form_copy(prop: dict, required: bool) -> bool:
    return bool(_empty_means_absent(prop, required)) or prop.get("type") in {"boolean", "array"}


def _as_in_a_form(prop: dict, required: bool) -> dict:
    if not _needs_a_form_copy(prop, required):
        return prop
    outer = {k: v for k, v in prop.items() if k in {"description", "title", "default", "readOnly", "writeOnly"}}
    value = {k: v for k, v in prop.items() if k not in outer and k != "nullable"}
    if value.get("type") == "array":  # a form writes a list as its items: an empty one is left out
        value["minItems"] = max(1, value.get("minItems", 0))
    alternatives = [value]
    if value.get("type") == "boolean":
        alternatives.append({"type": "string", "enum": FORM_BOOLEANS})
    if _empty_means_absent(prop, required):
        alternatives.append(dict(EMPTY_VALUE))
    return {**outer, "anyOf": alternatives}


def document_form_bodies(result, generator, request, public):
    """A form body carries text: no null, and no JSON boolean (DRF reads "true", "0", "on"…); an optional or a
    nullable field sent empty is left out (or null), as DRF reads forms; a list is its items, so an empty one is
    left out. Where a request component has such fields,
    its form media types get a copy (``<Component>Form``) that says so for them."""
    schemas = result.get("components", {}).get("schemas", {})
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method.startswith("x-") or not isinstance(operation, dict) or "requestBody" not in operation:
                continue
            for media_type, content in operation["requestBody"].get("content", {}).items():
                ref = content.get("schema", {}).get("$ref", "")
                name = ref.rsplit("/", 1)[-1]
                properties = schemas.get(name, {}).get("properties", {})
                required = set(schemas.get(name, {}).get("required", []))
                needs = [_needs_a_form_copy(prop, key in required) for key, prop in properties.items()]
                if media_type not in FORM_MEDIA_TYPES or not any(needs):
                    continue
                form = f"{name}Form"
                if form not in schemas:
                    copy = dict(schemas[name])
                    copy["properties"] = {key: _as_in_a_form(prop, key in required) for key, prop in properties.items()}
                    schemas[form] = copy
                content["schema"] = {"$ref": f"#/components/schemas/{form}"}
    return result


# Formats a pattern cannot say (a check character, a date of birth, a name's bytes), each named by the code that
# checks it. A field of one is described by its format alone: a pattern or a length beside it would tell a client
# less than the format's description and lead a generator to values the format does not allow.
NAMED_FORMATS: set[str] = set()


def named_format(name: str, description: str = ""):
    """``extend_schema_field`` for a text field of the format ``name``."""
    NAMED_FORMATS.add(name)
    schema = {"type": "string", "format": name} | ({"description": description} if description else {})
    return extend_schema_field(schema)


# What str.strip() takes for white space (DRF trims with it), spelled out: regex engines differ on \s.
PYTHON_SPACES = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's, and what DRF's text fields do besides their validators: a field's own pattern (a
    ``RegexValidator``) says more than the one drf-spectacular guesses for a decimal; DRF refuses a NUL character in
    text; and it trims white space before it checks a field, so a field that may not be blank (``minLength: 1`` in
    a request) needs something other than white space."""

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        # drf-spectacular moves a blank-allowing field's rules into the first of two alternatives (the other the
        # empty string), its default with them: a default is the field's, which the empty alternative admits.
        alternatives = schema.get("oneOf") or [{}]
        if "default" in alternatives[0] and "default" not in schema:
            schema["default"] = alternatives[0].pop("default")
        if schema.get("format") in NAMED_FORMATS:
            for rule in ("pattern", "minLength", "maxLength"):
                schema.pop(rule, None)
            return
        own = next((v for v in field.validators if isinstance(v, validators.RegexValidator)), None)
        if own is not None and schema.get("type") == "string" and "oneOf" not in schema:
            schema["pattern"] = own.regex.pattern.replace(r"\Z", "$").replace(r"\A", "^")
        text = isinstance(field, serializers.CharField) and schema.get("type") == "string"
        if not text or {"pattern", "enum", "oneOf"} & set(schema):
            return
        blank_refused = field.trim_whitespace and not field.allow_blank and schema.get("minLength")
        schema["pattern"] = rf"^[^\x00]*[^{PYTHON_SPACES}\x00][^\x00]*$" if blank_refused else r"^[^\x00]*$"
