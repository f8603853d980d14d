"""What stops a user's resources when their money runs out is registered, never looked up by name: the instances
app registers its handler when Django starts, and a console without one fails its system checks."""

from billing import arrears
from billing.checks import arrears_handler_registered
from instances.services import stop_for_arrears


def test_the_instances_app_registers_its_arrears_handler_at_start():
    assert arrears.registered_handler() is stop_for_arrears
    assert arrears_handler_registered(None) == []


def test_a_console_with_no_arrears_handler_does_not_pass_its_checks(monkeypatch):
    monkeypatch.setattr(arrears, "_handler", None)
    errors = arrears_handler_registered(None)
    assert [e.id for e in errors] == ["billing.E002"]
