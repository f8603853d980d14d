"""WhiteNoise that also runs in Django's async mode.

WhiteNoise 6 is sync-only middleware. Under an ASGI server Django then runs the whole middleware chain of every
request on a thread (a proxied JupyterLab page or a streamed ``/v1`` answer would hold one until its headers are
out), and a static file is read whole into memory before it is sent, with a warning. This subclass serves files in
either mode: under ASGI the file is read in blocks on a worker thread while the event loop sends them.
"""

import asyncio

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware

BLOCK = 256 * 1024


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None, **kwargs):
        super().__init__(get_response, **kwargs)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request):
        if self.autorefresh:  # development: the finders look on disk
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await self.get_response(request)
        response = self.serve(static_file, request)
        # A 304 or a HEAD has no file: an empty body, still asynchronous.
        response.streaming_content = _blocks(response.file_to_stream)
        return response


async def _blocks(file):
    # The file stays in the response's closers (FileResponse put it there), so it is closed when the response is.
    while file is not None and (block := await asyncio.to_thread(file.read, BLOCK)):
        yield block
