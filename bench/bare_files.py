"""The download floor: a bare WSGI app that sends one file (``BENCH_BARE_FILE``) through ``wsgi.file_wrapper``, as
the console's ``resolve`` does, served by the same gunicorn with the same workers (``bench.hub``)."""

import os


def application(environ, start_response):
    path = os.environ["BENCH_BARE_FILE"]
    start_response(
        "200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(os.path.getsize(path)))]
    )
    return environ["wsgi.file_wrapper"](open(path, "rb"), 1024 * 1024)  # noqa: SIM115 - the server closes it
