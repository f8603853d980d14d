"""A choice's label by its enum (``core.labels``), as the models' ``get_FOO_display`` shows it."""

from django.utils import translation

from billing.choices import TransactionKind
from billing.models import LedgerTransaction
from instances.choices import Status
from instances.models import Instance


def test_a_status_shows_its_label_in_the_active_language_and_an_unknown_value_as_itself():
    machine = Instance(status=Status.RUNNING)
    with translation.override("en"):
        assert machine.get_status_display() == "Running"
    with translation.override("zh-hans"):
        assert machine.get_status_display() == str(Status.RUNNING.label) != "Running"
    assert Instance(status="no-such-status").get_status_display() == "no-such-status"


def test_a_transactions_kind_and_description_show_the_kinds_label():
    charge = LedgerTransaction(kind=TransactionKind.USAGE, reference="my-box")
    with translation.override("en"):
        assert charge.get_kind_display() == str(TransactionKind.USAGE.label)
        assert charge.description.startswith(f"{TransactionKind.USAGE.label} · my-box")
