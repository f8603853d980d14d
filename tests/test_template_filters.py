"""The builtin filters every template has (``core.template_filters``)."""

from datetime import UTC, datetime

from django.template import engines
from django.utils import timezone


def _render(text: str, **context) -> str:
    return engines["django"].from_string(text).render(context)


def test_a_moment_shows_to_the_minute_in_the_current_time_zone_as_the_date_filter_does():
    moment = datetime(2026, 12, 6, 23, 59, 30, tzinfo=UTC)
    with timezone.override("Asia/Shanghai"):
        shown = _render("{{ at|minute }}", at=moment)
        assert shown == "2026-12-07 07:59"
        assert shown == _render('{{ at|date:"Y-m-d H:i" }}', at=moment)
    with timezone.override("UTC"):
        assert _render("{{ at|minute }}", at=moment) == "2026-12-06 23:59"


def test_nothing_shows_for_no_moment():
    assert _render("[{{ at|minute }}]", at=None) == "[]"
    assert _render("[{{ at|minute }}]", at="") == "[]"
    assert _render("[{{ at|minute }}]") == "[]"
