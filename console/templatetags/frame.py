"""``{% frame "name" value … %}…{% endframe %}``: a part of a page that many responses repeat (the header, the menus,
the footer, a row of a long list), rendered once per process for each combination of the values it names and kept.

Rendering the frame cost about 2 ms of every page (the menus' links, the language switch, the account menu), and a
list's fifty rows several more; a kept part costs a dictionary look-up. What a part shows must come only from the
values it names, the language, the time zone and the script prefix (always part of the key): a value it reads but
does not name would be shown from whoever rendered it first. For a row, ``object|loaded`` names every value the
object and the relations it was loaded with hold; a view that loads only some columns (``only()``) makes the key only
those, and a row that showed anything else would read it with a query of its own, which the pages' query counts
catch. A long list keys its rows by the values read for them instead (``console.value_rows``, ``row.key``), and
builds a row's object only for a row rendered afresh. Two values are filled in per response instead: the CSRF token
(``{% csrf_token %}``, ``{{ csrf_token }}``) and the page's own address (``{{ frame_here }}``, for the ``next`` of a
form that comes back to the page). A part is kept with a marker where each goes, so no token is ever shared between
responses, and a part is not kept once per address (a query string is anyone's to make up). A part whose ``unless``
condition holds is rendered and not kept: one showing what only this response holds (a form as just typed, with its
errors).

A whole list is a part too, around its rows' parts and keyed by every row's key (``rows|keys``): a list shown again
as it was costs one look-up instead of one per row, and a list with one row changed renders the others from their
own kept parts. A key longer than ``LONGEST_KEY`` (a list's) is kept under its digest (BLAKE2b, 256 bits).

Nothing that moves with the clock may be shown in a kept part ("3 minutes ago", a countdown): it would stop.

Parts are kept in the process, not in the shared cache: a new release (new templates, new static file names) starts
new processes and so renders them afresh, and a changed setting (``override_settings`` in tests) drops them. The
``KEPT`` parts used last are kept, and no more than ``KEPT_CHARS`` characters of them and their keys (a part of more
than a sixteenth of that is not kept).
"""

import hashlib
import itertools
import secrets
import threading
from collections import OrderedDict

from django import template
from django.core.signals import setting_changed
from django.db.models import Model
from django.template.base import FilterExpression
from django.template.loader_tags import BlockNode
from django.urls import get_script_prefix, get_urlconf
from django.utils import timezone, translation
from django.utils.html import escape
from django.utils.safestring import mark_safe

from console.value_rows import Row

register = template.Library()

KEPT = 4096
KEPT_CHARS = 16_000_000
LONGEST_KEY = 2048
# Letters and digits only, so escaping leaves them as they are wherever the template writes them.
_TOKEN = "csrfmarker" + secrets.token_hex(16)
_HERE = "heremarker" + secrets.token_hex(16)
_kept: OrderedDict[str, str] = OrderedDict()
_chars = 0  # of the parts kept
_lock = threading.Lock()
_nodes = itertools.count()


class FrameNode(template.Node):
    # Not looked into when a page's blocks are collected: Django walks the whole base template for its blocks on every
    # render of a page that extends it, and the header's part alone is hundreds of nodes. A part holds no block.
    child_nodelists = ()

    def __init__(self, nodelist, name: str, vary_on: list[FilterExpression], unless: FilterExpression | None = None):
        self.nodelist, self.name, self.vary_on, self.unless = nodelist, name, vary_on, unless
        # Each parsed part has keys of its own: a template parsed anew (edited, under the development server) shows
        # its new text, and two parts of the same name never show each other's.
        self.node = next(_nodes)

    def render(self, context) -> str:
        # Rendered afresh inside a part being kept (a row inside its list): its markers stay for the part around it
        # to fill in, and what only this response holds keeps that part from being kept too.
        inside = context.get("frame_here") == _HERE
        if self.unless is not None and self.unless.resolve(context):
            if inside:
                context["frame_spoiled"].append(self.name)
            return self.nodelist.render(context)  # shows what this response alone holds: rendered, never kept
        shown = tuple(value.resolve(context) for value in self.vary_on)
        where = (translation.get_language(), timezone.get_current_timezone_name(), get_script_prefix(), get_urlconf())
        # repr, not the values themselves: equal values may read differently (Decimal("1.0") and Decimal("1.00")).
        key = repr((self.node, self.name, where, shown))
        if len(key) > LONGEST_KEY:
            key = hashlib.blake2b(key.encode(), digest_size=32).hexdigest()
        with _lock:
            kept = _kept.get(key)
            if kept is not None:
                _kept.move_to_end(key)
        if kept is None:
            spoiled: list[str] = []
            with context.push(csrf_token=_TOKEN, frame_here=_HERE, frame_spoiled=spoiled):
                kept = self.nodelist.render(context)
            if not spoiled:
                _keep(key, kept)
            elif inside:
                context["frame_spoiled"].append(self.name)
        if inside:
            return mark_safe(kept)
        if _TOKEN in kept:
            token = context.get("csrf_token")
            kept = kept.replace(_TOKEN, "" if token in (None, "NOTPROVIDED") else str(token))  # as {% csrf_token %}
        if _HERE in kept:
            request = context.get("request")
            kept = kept.replace(_HERE, escape(request.get_full_path()) if request is not None else "")
        return mark_safe(kept)


def _keep(key: str, part: str) -> None:
    global _chars
    size = len(key) + len(part)
    if size > KEPT_CHARS // 16:  # one part never takes the room of many
        return
    with _lock:
        earlier = _kept.pop(key, None)  # another thread may have kept it meanwhile
        if earlier is not None:
            _chars -= len(key) + len(earlier)
        _kept[key] = part
        _chars += size
        while len(_kept) > KEPT or _chars > KEPT_CHARS:
            dropped, text = _kept.popitem(last=False)
            _chars -= len(dropped) + len(text)


@register.tag("frame")
def do_frame(parser, token):
    """``{% frame "name" value … [unless condition] %}`` … ``{% endframe %}``: with ``unless``, a response where the
    condition holds (a form holding what was just typed, its errors) renders the part and does not keep it."""
    bits = token.split_contents()
    if len(bits) < 2 or bits[1][0] not in "\"'" or bits[1][-1] != bits[1][0]:
        raise template.TemplateSyntaxError("{% frame %} takes a quoted name, then the values the part shows")
    unless = None
    if "unless" in bits:
        at = bits.index("unless")
        if at != len(bits) - 2:
            raise template.TemplateSyntaxError("{% frame %}: unless takes one condition, after the values")
        unless, bits = parser.compile_filter(bits[-1]), bits[:at]
    nodelist = parser.parse(("endframe",))
    parser.delete_first_token()
    if nodelist.get_nodes_by_type(BlockNode):  # kept, it would show the block of whichever page rendered it first
        raise template.TemplateSyntaxError("{% frame %} may not hold a {% block %}")
    return FrameNode(nodelist, bits[1][1:-1], [parser.compile_filter(bit) for bit in bits[2:]], unless)


@register.filter
def loaded(obj) -> tuple:
    """Every value a model instance holds (its loaded columns, and what a view set on it) and those of the relations
    it was loaded with or prefetched: the key of a row that shows it."""
    return _loaded(obj, set())


@register.filter
def keys(rows) -> tuple:
    """The key of a part showing a whole list: each row's key (``console.value_rows.Row``), a tuple's values (a
    named tuple's too, without its names: they are the same for every row), or an object's values as :func:`loaded`
    names them."""
    return tuple(
        row.key if isinstance(row, Row) else tuple(row) if isinstance(row, tuple) else _loaded(row, set())
        for row in rows
    )


_NESTED = (Model, list, tuple)


def _loaded(obj, seen: set[int]) -> tuple:
    if not isinstance(obj, Model):
        return (obj,)
    if id(obj) in seen:  # a one-to-one relation caches both ways: each object is named once
        return ("seen", type(obj).__name__, obj.pk)
    seen.add(id(obj))
    # What a view set on it may be another object, or a list of them: each is named by its own values too.
    # Most values are plain (strings, numbers, dates): only lists, tuples and models are looked into, and without a
    # call per value (a row's key is built for every row of a list, every time it is shown).
    values = tuple(
        (name, _value(value, seen) if isinstance(value, _NESTED) else value)
        for name, value in obj.__dict__.items()
        if name[0] != "_"
    )
    related = tuple(
        (name, _loaded(other, seen) if other is not None else None) for name, other in obj._state.fields_cache.items()
    )
    prefetched = tuple(
        (name, tuple(_loaded(other, seen) for other in rows))
        for name, rows in obj.__dict__.get("_prefetched_objects_cache", {}).items()
    )
    return type(obj).__name__, values, related, prefetched


def _value(value, seen: set[int]):
    if isinstance(value, Model):
        return _loaded(value, seen)
    if isinstance(value, (list, tuple)) and any(isinstance(item, Model) for item in value):
        return tuple(_loaded(item, seen) for item in value)
    return value


def forget(**_kwargs) -> None:
    """Drop every kept part: a changed setting (static files, languages, debug) may show in any of them."""
    global _chars
    with _lock:
        _kept.clear()
        _chars = 0


setting_changed.connect(forget, dispatch_uid="console.frame.forget")
