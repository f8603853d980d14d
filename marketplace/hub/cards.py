"""Model cards: Markdown with YAML front matter, as on Hugging Face and ModelScope.

The front matter (``license``, ``pipeline_tag``, ``library_name``, ``language``, ``tags``, ``datasets``…) fills the
item's filter fields that are empty; the body is rendered to HTML by markdown-it-py with raw HTML off and then
cleaned by nh3 (the Ammonia sanitiser), so no script, event handler or ``javascript:`` link survives even if
one of the two had a bug.
"""

import re
from dataclasses import dataclass, field

import nh3
import yaml
from django.utils.translation import gettext as _
from markdown_it import MarkdownIt

from core.errors import ServiceError

_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(?P<yaml>.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
_URL_SCHEMES = {"http", "https", "mailto"}


@dataclass(frozen=True)
class CardMeta:
    """What a card's front matter says about the item, normalised to strings and lists of strings."""

    licence: str = ""
    task: str = ""
    library_name: str = ""
    languages: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)


def _text(value) -> str:
    return "" if value is None or isinstance(value, dict | list) else str(value).strip()


def _strings(value) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return list(dict.fromkeys(text for v in values if (text := _text(v))))


def _plain(value):
    """``value`` as JSON would carry it: string keys, lists, strings, numbers, booleans and null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class _CardLoader(yaml.SafeLoader):
    """YAML without aliases: a few hundred bytes of nested aliases would otherwise expand to gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", event.start_mark)
        return super().compose_node(parent, index)


def split(card: str) -> tuple[dict, str]:
    """``(front matter, body)``. A card without front matter has an empty dict; bad YAML is a clear error."""
    match = _FRONT_MATTER.match(card or "")
    if not match:
        return {}, card or ""
    try:
        data = yaml.load(match.group("yaml"), Loader=_CardLoader) or {}  # noqa: S506 - a SafeLoader
        data = _plain(data)  # plain JSON values and string keys: no bytes, sets or dates
    except RecursionError:
        raise ServiceError(_("The model card's front matter is nested too deeply."), code="invalid_card") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ServiceError(
            _("The model card's front matter is not valid YAML: %(problem)s") % {"problem": problem},
            code="invalid_card",
        ) from exc
    if not isinstance(data, dict):
        raise ServiceError(_("The model card's front matter must be a set of “key: value” lines."), code="invalid_card")
    return data, card[match.end() :]


def meta(front_matter: dict) -> CardMeta:
    licence = _text(front_matter.get("license"))
    if licence.lower() == "other" and _text(front_matter.get("license_name")):
        licence = _text(front_matter.get("license_name"))
    return CardMeta(
        licence=licence[:100],
        task=_text(front_matter.get("pipeline_tag"))[:64],
        library_name=_text(front_matter.get("library_name"))[:64],
        languages=_strings(front_matter.get("language")),
        tags=_strings(front_matter.get("tags")),
        datasets=_strings(front_matter.get("datasets")),
    )


def fill_from_front_matter(values: dict, card_meta: CardMeta) -> dict:
    """``values`` with every empty filter field taken from the front matter; fields already set are kept."""
    from_card = {
        "licence": card_meta.licence,
        "task": card_meta.task,
        "library_name": card_meta.library_name,
        "languages": card_meta.languages,
        "tags": card_meta.tags,
    }
    return values | {name: value for name, value in from_card.items() if value and not values.get(name)}


def render(body: str) -> str:
    """The card body as sanitised HTML."""
    html = _MARKDOWN.render(body or "")
    return nh3.clean(html, url_schemes=_URL_SCHEMES, link_rel="noopener noreferrer nofollow")
