"""Every API error as JSON ``{"code": ..., "message": ..., "errors": {...}}`` in the request's language."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..errors import ServiceError
from ..field_errors import FieldError
from . import strict


class ErrorSerializer(strict.Serializer):
    """An error's body as the API's schema documents it."""

    code = serializers.CharField()
    message = serializers.CharField()


def _first_message(detail):
    if isinstance(detail, dict):
        for value in detail.values():
            return _first_message(value)
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail)


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        body = {"code": exc.code, "message": str(exc.message), **exc.details()}
        if isinstance(exc, FieldError):
            body["errors"] = {exc.field: [str(exc.message)]}
        return Response(body, status=exc.status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(_("Not found."))
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        field, first = next(iter(detail.items()), ("", ""))
        message = _first_message(first)
        if field and field != "non_field_errors":
            message = f"{field}: {message}"
        response.data = {"code": "invalid", "message": message, "errors": detail}
        response.status_code = status.HTTP_400_BAD_REQUEST
        return response
    detail = getattr(exc, "detail", "")
    code = detail.code if hasattr(detail, "code") else getattr(exc, "default_code", "error")
    response.data = {"code": code, "message": str(detail)}
    return response
