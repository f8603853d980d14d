"""Pages of a long, totally ordered listing read from whichever end of it is nearer.

A database reaches ``OFFSET n`` by walking n rows of the index from its front, so the last page of 100,000 ledger
transactions walked the whole index. Read backwards (the same ORDER BY with every direction flipped, which the
same index serves) the last page is at offset 0 and no page is more than half the listing away. The rows, and
their order once reversed back, are exactly those of the forward slice — provided the order is total, which is
why it must end with the primary key.

:class:`BothEnds` wraps such a queryset for Django's ``Paginator`` and for DRF's ``LimitOffsetPagination``:
both count it once and slice it once.
"""

from functools import cached_property

from django.db.models import QuerySet

TIE_BREAKERS = {"pk", "-pk", "id", "-id"}


class BothEnds:
    """``queryset``'s count and slices, each slice read from the nearer end of the listing."""

    ordered = True  # Paginator's warning about unordered lists does not apply: the order is checked below

    def __init__(self, queryset: QuerySet):
        check_total_order(queryset)
        self.queryset = queryset

    @cached_property
    def total(self) -> int:
        return self.queryset.count()

    def count(self) -> int:
        return self.total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, item):
        return read_nearer_end(
            item,
            self.total,
            lambda start, stop: self.queryset[start:stop],
            lambda start, stop: self.queryset.reverse()[start:stop],
        )


def check_total_order(queryset: QuerySet) -> None:
    """Refuse a listing whose order is not total: read backwards, its page would not be the forward page."""
    order = list(queryset.query.order_by) or list(queryset.model._meta.ordering)
    if not order or order[-1] not in TIE_BREAKERS:
        raise ValueError(f"reading a page backwards needs a total order ending with the primary key, not {order}")


def read_nearer_end(item, total: int, forward, backward=None) -> list:
    """The slice ``item`` of a listing of ``total`` rows: ``forward(start, stop)`` reads rows from its front,
    ``backward(start, stop)`` from its end (the order reversed), whichever is nearer; the rows come in order.
    Without ``backward`` every slice is read from the front."""
    if not isinstance(item, slice) or item.step not in (None, 1):
        raise TypeError("a listing read from either end takes slices without a step")
    start, stop, _step = item.indices(total)
    if start >= stop:
        return []
    if backward is None or start <= total - stop:
        return list(forward(start, stop))
    rows = list(backward(total - stop, total - start))
    rows.reverse()
    return rows
