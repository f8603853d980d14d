"""The database connection of a request whose response streams for long."""

from django.db import connection


def hand_back_connection() -> None:
    """Hand this request's database connection back to the pool now, before a long response streams (a model file
    downloaded, a model's answer token by token): under ASGI on PostgreSQL the web process borrows its connections
    from a pool of ``DATABASE_POOL_SIZE``, and a connection would otherwise stay borrowed until the response ends —
    a few slow downloads would leave no connection for any other page. A later query of the same request (a log
    line when the stream ends) borrows one again. Without a pool nothing is done: the connection is the worker's
    own, kept between its requests (``CONN_MAX_AGE``)."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()
