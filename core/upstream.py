"""HTTP clients for the console's reverse proxies: JupyterLab (``instances.jupyter_proxy``) and the OpenAI-compatible
``/v1`` proxy (``inference.proxy``).

An httpx client belongs to the event loop that made it. The ``/v1`` proxy opens one per request; the JupyterLab
proxy keeps one per upstream and event loop (``pooled_client``), as a lab page makes a hundred requests to the same
server and each would otherwise open a connection. Building a client loads the CA bundle (about 20 ms), so every
client shares one TLS context. Clients never follow redirects (the
browser or API client decides) and ignore the ``*_PROXY`` environment variables: an upstream is a machine of the
platform's, reached directly.

httpcore reads a connection 64 KB at a time, and each read of an async client costs far more in Python than in the
kernel: a cancel scope for its timeout, a turn of the event loop, h11's buffer and httpx's stream layers. A proxied
10 MB download made 160 such reads, most of the console's Python time on it (py-spy). A read returns what the socket
holds and never waits for more, so reading up to 256 KB (a Unix socket's whole buffer, and asyncio's own read size)
takes such a download in about 50 reads and leaves small answers as they were.
"""

import asyncio
import functools
import ssl
import weakref
from collections import OrderedDict

import httpcore
import httpx

UPSTREAM_READ_BYTES = 256 * 1024
if not hasattr(httpcore.AsyncHTTP11Connection, "READ_NUM_BYTES"):
    raise ImportError("httpcore no longer reads its connections in READ_NUM_BYTES: set the proxies' read size anew")
httpcore.AsyncHTTP11Connection.READ_NUM_BYTES = UPSTREAM_READ_BYTES


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def async_client(*, timeout: httpx.Timeout, socket: str = "", limits: httpx.Limits | None = None) -> httpx.AsyncClient:
    """A client for one request; ``socket`` sends it over that Unix socket whatever host the URL names."""
    transport = httpx.AsyncHTTPTransport(uds=socket or None, verify=_tls_context(), limits=limits or httpx.Limits())
    return httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)


POOLED_UPSTREAMS = 128  # per event loop; the least recently used client beyond that is closed, later
# A few idle connections per upstream (a lab page's bursts), closed after a while unused: 128 upstreams hold at most
# 512 idle sockets, well inside a process's usual 1,024 open files.
POOLED_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=4, keepalive_expiry=30)
_pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_closing: set = set()


def pooled_client(*, timeout: httpx.Timeout, socket: str = "", origin: str = "") -> httpx.AsyncClient:
    """This event loop's client for one upstream (a Unix socket, or an origin), kept with its connections open.
    Never close it: it is shared; requests on it are independent."""
    loop = asyncio.get_running_loop()
    pool = _pools.setdefault(loop, OrderedDict())
    key = (socket, origin)
    client = pool.get(key)
    if client is None or client.is_closed:
        client = pool[key] = async_client(timeout=timeout, socket=socket, limits=POOLED_LIMITS)
        while len(pool) > POOLED_UPSTREAMS:
            _key, oldest = pool.popitem(last=False)
            # Closed once whatever it may still be relaying (a long download) has had its read timeout to finish.
            loop.call_later(timeout.read or 0, _close, loop, oldest)
    pool.move_to_end(key)
    return client


def _close(loop, client: httpx.AsyncClient) -> None:
    task = loop.create_task(client.aclose())
    _closing.add(task)  # held until done: a task nobody references may be collected before it runs
    task.add_done_callback(_closing.discard)
