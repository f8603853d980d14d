"""HTTP clients for the console's reverse proxies: JupyterLab (``instances.jupyter_proxy``) and the OpenAI-compatible
``/v1`` proxy (``inference.proxy``).

An httpx client belongs to the event loop that made it. The ``/v1`` proxy opens one per request; the JupyterLab
proxy keeps one per upstream and event loop (``pooled_client``), as a lab page makes a hundred requests to the same
server and each would otherwise open a connection. Building a client loads the CA bundle (about 20 ms), so every
client shares one TLS context. Clients never follow redirects (the
browser or API client decides) and ignore the ``*_PROXY`` environment variables: an upstream is a machine of the
platform's, reached directly.
"""

import asyncio
import functools
import ssl
import weakref
from collections import OrderedDict

import httpx


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def async_client(*, timeout: httpx.Timeout, socket: str = "") -> httpx.AsyncClient:
    """A client for one request; ``socket`` sends it over that Unix socket whatever host the URL names."""
    transport = httpx.AsyncHTTPTransport(uds=socket or None, verify=_tls_context())
    return httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)


POOLED_UPSTREAMS = 256  # per event loop; the least recently used client beyond that is closed
_pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def pooled_client(*, timeout: httpx.Timeout, socket: str = "", origin: str = "") -> httpx.AsyncClient:
    """This event loop's client for one upstream (a Unix socket, or an origin), kept with its connections open.
    Never close it: it is shared; requests on it are independent."""
    loop = asyncio.get_running_loop()
    pool = _pools.setdefault(loop, OrderedDict())
    key = (socket, origin)
    client = pool.get(key)
    if client is None or client.is_closed:
        client = pool[key] = async_client(timeout=timeout, socket=socket)
        while len(pool) > POOLED_UPSTREAMS:
            _key, oldest = pool.popitem(last=False)
            loop.create_task(oldest.aclose())
    pool.move_to_end(key)
    return client
