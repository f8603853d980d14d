"""Response bodies from synchronous iterators (a file's blocks, a generator), sent under ASGI without reading them
whole first."""

import asyncio

from django.core.handlers.asgi import ASGIRequest


async def read_in_thread(iterable):
    """The items of a synchronous iterable, each read on a worker thread, for a response served under ASGI: Django
    reads a synchronous body whole into memory before it sends a byte (a model file of gigabytes), with a warning,
    while this one is sent as it is read. The iterator is closed when the response is, sent to the end or not."""
    iterator = iter(iterable)
    done = object()
    try:
        while (item := await asyncio.to_thread(next, iterator, done)) is not done:
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


def send_as_read(request, response):
    """``response`` (a FileResponse, or any streaming one over a synchronous body), made to send its body as it is
    read when the request came under ASGI (:func:`read_in_thread`). Under WSGI it is left as it is: the server may
    send a file with sendfile(2)."""
    http_request = getattr(request, "_request", request)  # DRF's Request wraps Django's
    if isinstance(http_request, ASGIRequest) and response.streaming and not response.is_async:
        response.streaming_content = read_in_thread(response.streaming_content)
    return response
