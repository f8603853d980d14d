"""The API's JSON parser: every body goes through ``core.jsonbody.parse_json_body``, so a body nested too deeply,
not in its charset or not strict JSON answers 400 ``{"code": "parse_error", "message": …}`` instead of a server
error."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as DrfJSONParser
from rest_framework.parsers import get_encoding

from ..jsonbody import InvalidJsonBody, parse_json_body


class JSONParser(DrfJSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return parse_json_body(stream.read(), get_encoding(parser_context or {}))
        except InvalidJsonBody as exc:
            raise ParseError(exc.message) from exc
