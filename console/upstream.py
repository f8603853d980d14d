"""HTTP clients for the console's reverse proxies: JupyterLab (``instances.jupyter_proxy``) and the OpenAI-compatible
``/v1`` proxy (``inference.proxy``).

A proxy opens one client per request, because an httpx client belongs to the event loop that made it. Building one
loads the CA bundle (about 20 ms), so every client shares one TLS context. Clients never follow redirects (the
browser or API client decides) and ignore the ``*_PROXY`` environment variables: an upstream is a machine of the
platform's, reached directly.
"""

import functools
import ssl

import httpx


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def async_client(*, timeout: httpx.Timeout, socket: str = "") -> httpx.AsyncClient:
    """A client for one request; ``socket`` sends it over that Unix socket whatever host the URL names."""
    transport = httpx.AsyncHTTPTransport(uds=socket or None, verify=_tls_context())
    return httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)
