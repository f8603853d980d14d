"""A refused input that names the field it came from."""

from .errors import ServiceError


class FieldError(ServiceError):
    """A ``ServiceError`` about one input: a form shows it beside ``field``, and the API answers
    ``{"code", "message", "errors": {field: [message]}}`` so a client knows which parameter to fix."""

    def __init__(self, field: str, message, *, code: str | None = None, status: int | None = None):
        super().__init__(message, code=code)
        self.field = field
        if status is not None:  # e.g. 409: the value is well-formed but taken; 404: it names nothing of yours
            self.status = status
