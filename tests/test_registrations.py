"""What billing calls in the apps above it is registered when Django starts, never looked up by name: the
instances app's arrears stop and the marketplace's image author share; a console without them fails its system
checks."""

from billing import arrears, metering
from billing.checks import arrears_handler_registered, author_shares_registered
from core import attaching
from instances import images, machines
from instances.checks import image_source_registered, storage_registered
from instances.lifecycle import stop_for_arrears
from marketplace.hub import services as hub_services
from marketplace.images import revenue
from marketplace.images import services as image_services
from storage import attached, mounts
from storage.checks import hub_registered, machines_registered


def test_the_instances_app_registers_its_arrears_handler_at_start():
    assert arrears.registered_handler() is stop_for_arrears
    assert arrears_handler_registered(None) == []


def test_a_console_with_no_arrears_handler_does_not_pass_its_checks(monkeypatch):
    monkeypatch.setattr(arrears, "_handler", None)
    errors = arrears_handler_registered(None)
    assert [e.id for e in errors] == ["billing.E002"]


def test_the_marketplace_registers_the_image_authors_share_and_billing_refuses_to_start_without_it(monkeypatch):

    assert metering.registered_author_shares() is revenue.author_shares
    monkeypatch.setattr(metering, "_author_shares", None)
    assert [e.id for e in author_shares_registered(None)] == ["billing.E003"]


def test_the_marketplace_registers_the_image_source_instances_boot_from(monkeypatch):

    assert images.source() is image_services
    monkeypatch.setattr(images, "_source", None)
    assert [e.id for e in image_source_registered(None)] == ["instances.E001"]


def test_the_marketplace_registers_the_hub_that_mounts_ask(monkeypatch):

    assert mounts.hub() is hub_services
    monkeypatch.setattr(mounts, "_hub", None)
    assert [e.id for e in hub_registered(None)] == ["storage.E001"]


def test_storage_registers_what_it_attaches_to_instances_and_instances_refuse_to_start_without_it(monkeypatch):

    assert attaching.attached() is attached
    monkeypatch.setattr(attaching, "_attached", None)
    assert [e.id for e in storage_registered(None)] == ["instances.E002"]


def test_instances_register_the_machines_storage_attaches_to_and_storage_refuses_to_start_without_them(monkeypatch):

    assert attaching.machines() is machines
    assert machines_registered(None) == []
    monkeypatch.setattr(attaching, "_machines", None)
    assert [e.id for e in machines_registered(None)] == ["storage.E002"]
