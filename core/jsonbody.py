"""Reading a JSON request body: the one parser of bodies that clients send, for the API and the /v1 proxy.

``json.loads`` raises ``RecursionError`` (not ``ValueError``) on a few kilobytes of ``[[[[…``, which would answer
500; it also accepts ``NaN`` and ``Infinity``, which are not JSON and which no other client or server reads back.
Here every body that is not strict JSON raises ``InvalidJsonBody`` with a message for the client.
"""

import json

from django.utils.translation import gettext as _


class InvalidJsonBody(ValueError):
    """The body is not JSON this service reads; ``message`` says why, translated."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


def _refuse_constant(name):
    raise InvalidJsonBody(_("The body is not valid JSON: %(value)s is not a JSON value.") % {"value": name})


def parse_json_body(raw: bytes, encoding: str = "utf-8"):
    """The parsed body (any JSON value), or ``InvalidJsonBody`` for undecodable, malformed or too deeply nested
    input. An empty body is refused too: callers decide what an empty body means before calling."""
    try:
        text = raw.decode(encoding) if isinstance(raw, bytes | bytearray) else raw
    except (UnicodeDecodeError, LookupError) as exc:
        message = _("The body is not valid JSON: it is not %(encoding)s text.") % {"encoding": encoding}
        raise InvalidJsonBody(message) from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise InvalidJsonBody(_("The body is not valid JSON: it is nested too deeply.")) from exc
    except InvalidJsonBody:
        raise
    except ValueError as exc:
        raise InvalidJsonBody(_("The body is not valid JSON: %(error)s") % {"error": exc}) from exc
