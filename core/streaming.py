"""Response bodies from synchronous iterators (a file's blocks, a generator), sent under ASGI without reading them
whole first."""

from functools import partial

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest

# A file's body is read in blocks this large under ASGI (Django would read 64 KB at a time).
FILE_BLOCK = 1024 * 1024


async def read_in_thread(iterable):
    """The items of a synchronous iterable for a response served under ASGI, each read on the request's own thread
    (``sync_to_async``, as Django reads a synchronous body itself): Django reads such a body whole into memory
    before it sends a byte (a model file of gigabytes), with a warning, while this one is sent as it is read."""
    iterator = iter(iterable)
    done = object()
    read = sync_to_async(next)
    while (item := await read(iterator, done)) is not done:
        yield item


def send_as_read(request, response):
    """``response`` (a FileResponse, or any streaming one over a synchronous body), made to send its body as it is
    read when the request came under ASGI (:func:`read_in_thread`; a file in ``FILE_BLOCK`` reads). Under WSGI it
    is left as it is: the server may send a file with sendfile(2)."""
    http_request = getattr(request, "_request", request)  # DRF's Request wraps Django's
    if isinstance(http_request, ASGIRequest) and response.streaming and not response.is_async:
        file = getattr(response, "file_to_stream", None)  # FileResponse's file, closed when the response is
        body = iter(partial(file.read, FILE_BLOCK), b"") if file is not None else response.streaming_content
        response.streaming_content = read_in_thread(body)
    return response
