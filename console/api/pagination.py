"""The API's one pagination class: ``?limit=&offset=`` pages with a ceiling on ``limit``.

Without a ceiling, ``?limit=10**30`` reaches the database as a LIMIT no integer column holds (SQLite and
PostgreSQL both refuse it: a server error) and a merely large one reads a whole table into one response. A limit
above the ceiling is lowered to it; a limit or offset that is not a positive integer falls back to the default
(DRF's rule), and an offset past the end is an empty page.
"""

from rest_framework import pagination

MAX_LIMIT = 1000  # `gpucloud storage ls` lists a folder with limit=1000


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    max_limit = MAX_LIMIT
