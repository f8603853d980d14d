"""The API's one pagination class: ``?limit=&offset=`` pages with a ceiling on ``limit``.

Without a ceiling, ``?limit=10**30`` reaches the database as a LIMIT no integer column holds (SQLite and
PostgreSQL both refuse it: a server error) and a merely large one reads a whole table into one response. A limit
above the ceiling is lowered to it and an offset past the end is an empty page. A limit that is not a whole number
of at least 1, or an offset that is not a whole number of at least 0, is a 400 naming the parameter (DRF's default
would quietly answer the first page, which a client paging through a list takes for the page it asked for); the
API's schema states the same minimums.
"""

from django.utils.translation import gettext as _
from rest_framework import pagination
from rest_framework.exceptions import ValidationError

MAX_LIMIT = 1000  # `gpucloud storage ls` lists a folder with limit=1000


def _whole_number(request, name: str, minimum: int) -> int | None:
    raw = request.query_params.get(name, "")
    if raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) < minimum:
        raise ValidationError(
            {name: [_("Must be a whole number of at least %(minimum)s.") % {"minimum": minimum}]}, code="invalid"
        )
    return int(raw)


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request):
        limit = _whole_number(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request):
        return _whole_number(request, self.offset_query_param, 0) or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        minimums = {self.limit_query_param: 1, self.offset_query_param: 0}
        for parameter in parameters:
            if parameter["name"] in minimums:
                parameter["schema"]["minimum"] = minimums[parameter["name"]]
        return parameters
