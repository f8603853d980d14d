"""``{% frame "name" value … %}…{% endframe %}``: a part of the page frame (the header, the menus, the footer),
rendered once per process for each combination of the values it names and kept, as every console page repeats it.

Rendering the frame cost about 2 ms of every page (the menus' links, the language switch, the account menu); a kept
one costs a dictionary look-up. What a part shows must come only from the values it names, the language and the
script prefix (both always part of the key): a value it reads but does not name would be shown from whoever
rendered it first. The CSRF token is the exception: each part is kept with a marker where the token goes, and every
response gets its own request's token there, so no token is ever shared between responses.

Parts are kept in the process, not in the shared cache: a new release (new templates, new static file names) starts
new processes and so renders them afresh, and a changed setting (``override_settings`` in tests) drops them. At
most ``KEPT`` combinations are kept; beyond that the oldest half goes.
"""

import secrets
import threading

from django import template
from django.core.signals import setting_changed
from django.template.base import FilterExpression
from django.urls import get_script_prefix, get_urlconf
from django.utils import translation
from django.utils.safestring import mark_safe

register = template.Library()

KEPT = 1024
# Letters and digits only, so escaping leaves it as it is wherever the template writes the token.
_MARKER = "csrfmarker" + secrets.token_hex(16)
_kept: dict[tuple, list[str]] = {}
_lock = threading.Lock()


class FrameNode(template.Node):
    def __init__(self, nodelist, name: str, vary_on: list[FilterExpression]):
        self.nodelist, self.name, self.vary_on = nodelist, name, vary_on

    def render(self, context) -> str:
        key = (self.name, translation.get_language(), get_script_prefix(), get_urlconf())
        key += tuple(repr(value.resolve(context)) for value in self.vary_on)
        parts = _kept.get(key)
        if parts is None:
            with context.push(csrf_token=_MARKER):
                parts = self.nodelist.render(context).split(_MARKER)
            with _lock:
                if len(_kept) >= KEPT:
                    for old in list(_kept)[: KEPT // 2]:
                        _kept.pop(old, None)
                _kept[key] = parts
        if len(parts) == 1:
            return parts[0]
        token = context.get("csrf_token")
        token = "" if token in (None, "NOTPROVIDED") else str(token)  # as {% csrf_token %} renders without one
        return mark_safe(token.join(parts))


@register.tag("frame")
def do_frame(parser, token):
    """``{% frame "name" value … %}`` … ``{% endframe %}``."""
    bits = token.split_contents()
    if len(bits) < 2 or bits[1][0] not in "\"'" or bits[1][-1] != bits[1][0]:
        raise template.TemplateSyntaxError("{% frame %} takes a quoted name, then the values the part shows")
    nodelist = parser.parse(("endframe",))
    parser.delete_first_token()
    return FrameNode(nodelist, bits[1][1:-1], [parser.compile_filter(bit) for bit in bits[2:]])


def forget(**_kwargs) -> None:
    """Drop every kept part: a changed setting (static files, languages, debug) may show in any of them."""
    with _lock:
        _kept.clear()


setting_changed.connect(forget, dispatch_uid="console.frame.forget")
