"""``{% frame "name" value … %}…{% endframe %}``: a part of a page that many responses repeat (the header, the menus,
the footer, a row of a long list), rendered once per process for each combination of the values it names and kept.

Rendering the frame cost about 2 ms of every page (the menus' links, the language switch, the account menu), and a
list's fifty rows several more; a kept part costs a dictionary look-up. What a part shows must come only from the
values it names, the language, the time zone and the script prefix (always part of the key): a value it reads but
does not name would be shown from whoever rendered it first. For a row, ``object|loaded`` names every value the
object and the relations it was loaded with hold; a view that loads only some columns (``only()``) makes the key
only those, and a row that showed anything else would read it with a query of its own, which the pages' query
counts catch. The CSRF token is the exception: each part is kept with a marker where the token goes, and every
response gets its own request's token there, so no token is ever shared between responses.

Nothing that moves with the clock may be shown in a kept part ("3 minutes ago", a countdown): it would stop.

Parts are kept in the process, not in the shared cache: a new release (new templates, new static file names) starts
new processes and so renders them afresh, and a changed setting (``override_settings`` in tests) drops them. The
``KEPT`` parts used last are kept.
"""

import secrets
import threading
from collections import OrderedDict

from django import template
from django.core.signals import setting_changed
from django.db.models import Model
from django.template.base import FilterExpression
from django.urls import get_script_prefix, get_urlconf
from django.utils import timezone, translation
from django.utils.safestring import mark_safe

register = template.Library()

KEPT = 4096
# Letters and digits only, so escaping leaves it as it is wherever the template writes the token.
_MARKER = "csrfmarker" + secrets.token_hex(16)
_kept: OrderedDict[str, list[str]] = OrderedDict()
_lock = threading.Lock()


class FrameNode(template.Node):
    def __init__(self, nodelist, name: str, vary_on: list[FilterExpression]):
        self.nodelist, self.name, self.vary_on = nodelist, name, vary_on

    def render(self, context) -> str:
        shown = tuple(value.resolve(context) for value in self.vary_on)
        where = (translation.get_language(), timezone.get_current_timezone_name(), get_script_prefix(), get_urlconf())
        # repr, not the values themselves: equal values may read differently (Decimal("1.0") and Decimal("1.00")).
        key = repr((self.name, where, shown))
        with _lock:
            parts = _kept.get(key)
            if parts is not None:
                _kept.move_to_end(key)
        if parts is None:
            with context.push(csrf_token=_MARKER):
                parts = self.nodelist.render(context).split(_MARKER)
            with _lock:
                _kept[key] = parts
                while len(_kept) > KEPT:
                    _kept.popitem(last=False)
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


@register.filter
def loaded(obj) -> tuple:
    """Every value a model instance holds (its loaded columns, and what a view set on it) and those of the relations
    it was loaded with or prefetched: the key of a row that shows it."""
    if not isinstance(obj, Model):
        return (obj,)
    values = tuple(item for item in obj.__dict__.items() if item[0][0] != "_")
    related = tuple((name, loaded(other) if other is not None else None)
                    for name, other in obj._state.fields_cache.items())  # fmt: skip
    prefetched = tuple((name, tuple(loaded(other) for other in rows))
                       for name, rows in obj.__dict__.get("_prefetched_objects_cache", {}).items())  # fmt: skip
    return type(obj).__name__, values, related, prefetched


def forget(**_kwargs) -> None:
    """Drop every kept part: a changed setting (static files, languages, debug) may show in any of them."""
    with _lock:
        _kept.clear()


setting_changed.connect(forget, dispatch_uid="console.frame.forget")
