"""Domain errors raised by service functions in every app.

Views turn them into a message on the page; the API's exception handler turns them into
``{"code": ..., "message": ...}`` with the status below. Messages are translatable strings.
"""


class ServiceError(Exception):
    """A request the service refuses, with a translated message for the user."""

    status = 400
    code = "invalid"

    def __init__(self, message, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code

    def details(self) -> dict:
        """What the API's error body carries besides the code and the message (an error that knows more, such as
        where capacity is free, adds it here so every endpoint answers it the same way)."""
        return {}


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Forbidden(ServiceError):
    """The caller may see the object but their role does not allow this action."""

    status = 403
    code = "permission_denied"


class Conflict(ServiceError):
    """The object is not in a state that allows the action (e.g. stopping a stopped instance)."""

    status = 409
    code = "conflict"


class PaymentRequired(ServiceError):
    status = 402
    code = "insufficient_balance"


class Unavailable(ServiceError):
    """Capacity or a dependency is not available right now."""

    status = 503
    code = "unavailable"
