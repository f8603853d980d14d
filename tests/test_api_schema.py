"""The OpenAPI document as drf-spectacular's own check judges it, and the rules in it that OpenAPI 3.0 has no
keyword for.

``manage.py spectacular --validate --fail-on-warn`` is what a release or a client generator runs: it must find a
valid OpenAPI document and no warning (a warning is a field whose schema drf-spectacular had to guess, or an enum
it named by a hash)."""

import copy

import jsonschema
import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator

from instances.environment import MAX_VARIABLES
from tests.fixtures.openapi import read_pattern_properties


def test_the_schema_is_valid_openapi_and_is_generated_without_a_warning(tmp_path):
    # A CommandError when a warning or an error came up, or when the document is not valid OpenAPI.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))

    assert (tmp_path / "schema.yaml").read_text().startswith("openapi: 3.0.3\n")


def test_every_default_in_the_schema_is_a_value_its_own_schema_admits():
    # What openapi-spec-validator checks since 0.8 (a client generator fills in defaults): a blank default of a
    # field whose pattern is for the filled-in value once made the whole document invalid for it.
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]

    def with_defaults(node, where):
        """(where, schema) for every schema under ``node`` that names a default, alternatives' included."""
        if isinstance(node, dict):
            if "default" in node:
                yield where, node
            for key, value in node.items():
                yield from with_defaults(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                yield from with_defaults(value, f"{where}/{index}")

    def admits(schema: dict, value) -> bool:
        own = {key: rule for key, rule in schema.items() if key != "default"} | {"components": components}
        return jsonschema.Draft4Validator(own).is_valid(value)

    wrong = [
        (where, schema["default"])
        for where, schema in with_defaults(components["schemas"], "")
        if not admits(schema, schema["default"])
    ]
    assert wrong == []


def _as_json_schema(variables: dict) -> dict:
    schema = copy.deepcopy(variables)
    read_pattern_properties(schema)
    return schema


@pytest.fixture(scope="module")
def variables_schemas():
    document = SchemaGenerator().get_schema(request=None, public=True)
    components = document["components"]["schemas"]
    return {name: components[name]["properties"]["env"] for name in ("InstanceCreateRequest", "JobCreateRequest")}


@pytest.mark.parametrize("component", ["InstanceCreateRequest", "JobCreateRequest"])
@pytest.mark.parametrize(
    ("env", "valid"),
    [
        ({}, True),
        ({"A": "", "_x1": "text with spaces", "N" * 64: "é"}, True),
        ({f"V{i}": "" for i in range(MAX_VARIABLES)}, True),
        ({f"V{i}": "" for i in range(MAX_VARIABLES + 1)}, False),
        ({"1A": "x"}, False),
        ({"": "x"}, False),
        ({"A-B": "x"}, False),
        ({"N" * 65: "x"}, False),
        ({"A": "nul\x00"}, False),
        ({"A": 1}, False),
    ],
)
def test_environment_variable_names_and_values_are_in_the_schema_as_the_api_checks_them(
    variables_schemas, component, env, valid
):
    # OpenAPI 3.0 cannot say which keys an object may have: the names' rule is the x-patternProperties extension,
    # and a tool that reads it must find the names the API takes (``instances.environment.check_env``).
    schema = _as_json_schema(variables_schemas[component])

    assert jsonschema.Draft7Validator(schema).is_valid(env) is valid
