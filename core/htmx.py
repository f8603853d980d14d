"""The one helper that says whether a request wants a partial."""


def wants_partial(request) -> bool:
    """True for an htmx request that is not a full-page boost."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted
