"""Staff actions do what they say, through the owning service, and each writes one audit row (who, what, before,
after, why, when, from where). Bad input gets a clear message and changes nothing."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from accounts.ops.audit import Actor
from accounts.ops.choices import AuditAction
from accounts.ops.models import AuditEntry, AuditLogIsAppendOnly
from backoffice import services
from billing import ledger, metering
from billing.models import LedgerTransaction, Price, SubsidyProgramme, UsageSession
from billing.quote import quote
from catalog.models import Node
from core.errors import Conflict, ServiceError
from instances import launching
from instances import lifecycle as instance_lifecycle
from instances.choices import Status
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


def key():
    return str(uuid.uuid4())


def test_a_finance_adjustment_posts_through_the_ledger_is_audited_and_check_ledger_passes(
    client, finance_user, owner, fund
):
    fund(owner, "20")
    client.force_login(finance_user)
    url = reverse("ops:adjust-balance", args=[owner.public_id])
    idem = key()

    response = client.post(
        url, {"amount": "-7.50", "reason": "Refund of a double top-up", "idempotency_key": idem}, REMOTE_ADDR="10.1.2.3"
    )
    client.post(url, {"amount": "-7.50", "reason": "Refund of a double top-up", "idempotency_key": idem})

    assert response.status_code == 302
    tx = LedgerTransaction.objects.get(kind="adjustment", created_by=finance_user)
    assert tx.user_amount == Decimal("-7.50") and tx.reason == "Refund of a double top-up"
    [entry] = AuditEntry.objects.all()  # the double submit posted and audited once
    assert entry.action == AuditAction.BALANCE_ADJUSTED and entry.actor == finance_user
    assert entry.target_id == str(owner.public_id) and entry.ip == "10.1.2.3"
    assert entry.before == {"cash": "20.00"} and entry.after["cash"] == "12.50" and entry.after["amount"] == "-7.50"
    assert ledger.check() == []
    call_command("check_ledger")


@pytest.mark.parametrize(
    ("amount", "reason", "message"),
    [
        ("5", "", "Give a reason"),
        ("0", "typo", "must not be zero"),
        ("abc", "typo", "Enter a number"),
        ("5.555", "typo", "2 decimal places"),
        ("99999999", "typo", "digits before the decimal point"),
    ],
)
def test_a_bad_adjustment_is_refused_with_a_message_and_posts_nothing(
    client, finance_user, owner, amount, reason, message
):
    client.force_login(finance_user)
    response = client.post(
        reverse("ops:adjust-balance", args=[owner.public_id]),
        {"amount": amount, "reason": reason, "idempotency_key": key()},
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not LedgerTransaction.objects.exists() and not AuditEntry.objects.exists()


def test_a_debit_adjustment_is_confirmed_with_the_minus_before_the_yen(client, finance_user, owner, fund):
    fund(owner, "20")
    client.force_login(finance_user)
    client.cookies["django_language"] = "en"
    response = client.post(
        reverse("ops:adjust-balance", args=[owner.public_id]),
        {"amount": "-7.5", "reason": "Refund", "idempotency_key": key()},
        follow=True,
    )
    html = response.content.decode()
    assert "Balance adjusted by −¥7.50." in html and "¥-7.50" not in html


def test_an_adjustment_beyond_the_limit_is_refused_by_the_service(finance_user, owner):
    with pytest.raises(ServiceError, match="at most"):
        services.adjust_balance(
            Actor(finance_user), user_id=owner.public_id, amount="2000000", reason="x", idempotency_key=key()
        )


def test_force_stop_sends_the_checkpoint_stop_through_the_stop_service_and_is_audited(
    client, ops_user, owner, launch, lifecycle
):
    instance = launch(chip="ascend-910b", cards=1)
    settle()
    client.force_login(ops_user)

    response = client.post(reverse("ops:force-stop", args=[instance.public_id]), {"reason": "Card fault on node"})

    assert response.status_code == 302
    instance.refresh_from_db()
    assert instance.status == Status.STOPPING and instance.wanted == "stopped"
    assert "Card fault on node" in instance.status_detail
    assert lifecycle.open_sessions() == []  # billing stopped when the stop was asked
    settle()
    assert Instance.objects.get(pk=instance.pk).status == Status.STOPPED
    entry = AuditEntry.objects.get(action=AuditAction.INSTANCE_FORCE_STOPPED)
    assert entry.before["status"] == "running" and entry.after["status"] == "stopping"
    assert entry.reason == "Card fault on node" and entry.target_id == str(instance.public_id)


def test_force_stop_needs_a_reason_and_refuses_a_stopped_instance_clearly(ops_user, launch, lifecycle):
    instance = launch()
    settle()
    with pytest.raises(ServiceError, match="reason"):
        services.force_stop(Actor(ops_user), instance_id=instance.public_id, reason=" ")
    instance_lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
    settle()
    with pytest.raises(Conflict):
        services.force_stop(Actor(ops_user), instance_id=instance.public_id, reason="again")
    assert not AuditEntry.objects.exists()


def test_a_drained_node_takes_no_new_instances_until_it_is_returned(ops_user, launch, lifecycle, catalog):
    nodes = list(Node.objects.filter(chip__slug="mlu370-x8"))
    actor = Actor(ops_user, ip="127.0.0.1")
    for node in nodes:
        services.set_drained(actor, zone_slug=node.zone.slug, name=node.name, drained=True, reason="maintenance")

    with pytest.raises(ServiceError, match="No free cards"):
        launch(chip="mlu370-x8")
    with pytest.raises(Conflict, match="already drained"):
        services.set_drained(actor, zone_slug=nodes[0].zone.slug, name=nodes[0].name, drained=True)

    services.set_drained(actor, zone_slug=nodes[0].zone.slug, name=nodes[0].name, drained=False)
    assert launch(chip="mlu370-x8").node_id == nodes[0].pk
    actions = list(AuditEntry.objects.order_by("pk").values_list("action", flat=True))
    assert actions == [AuditAction.NODE_DRAINED] * len(nodes) + [AuditAction.NODE_RETURNED]


def test_a_new_price_applies_to_new_launches_while_a_running_run_keeps_its_frozen_rate(
    finance_user, owner, fund, catalog, instant
):
    fund(owner, "500")
    chip = catalog["mlu370-x8"]
    with time_machine.travel(timezone.now(), tick=False) as clock:
        running = launching.launch(
            owner, launching.LaunchRequest(name="old", chip="mlu370-x8", image="pytorch-2.2-neuware")
        )
        settle()
        old_rate = UsageSession.objects.get(resource_id=running.public_id).payable_per_hour
        old_price = quote(chip=chip).list_per_card_hour

        services.add_price(
            Actor(finance_user),
            chip_slug="mlu370-x8",
            per_hour=old_price * 2,
            effective_from=timezone.now(),
            note="Supply shortage",
        )
        assert quote(chip=chip).list_per_card_hour == old_price * 2  # shown and charged for new launches
        newcomer = launching.launch(
            owner, launching.LaunchRequest(name="new", chip="mlu370-x8", image="pytorch-2.2-neuware")
        )
        settle()
        clock.shift(timedelta(minutes=60))
        metering.meter()

    old_session = UsageSession.objects.get(resource_id=running.public_id)
    new_session = UsageSession.objects.get(resource_id=newcomer.public_id)
    assert old_session.payable_per_hour == old_rate
    assert old_session.charged == (old_rate * old_session.charged_minutes / 60).quantize(Decimal("0.01"))
    assert new_session.payable_per_hour == old_rate * 2
    entry = AuditEntry.objects.get(action=AuditAction.PRICE_ADDED)
    assert entry.before["per_hour"] == str(old_price) and entry.reason == "Supply shortage"
    assert ledger.check() == []


def test_a_price_cannot_be_backdated(finance_user, catalog):
    with pytest.raises(ServiceError, match="now or later"):
        services.add_price(
            Actor(finance_user), chip_slug="mlu370-x8", per_hour="1", effective_from=timezone.now() - timedelta(days=1)
        )
    assert not Price.objects.filter(per_hour=1).exists()


def test_pausing_a_programme_removes_its_discount_at_once_and_resuming_restores_it(
    finance_user, catalog, xinchuang_subsidy
):
    chip = catalog["ascend-910b"]
    assert quote(chip=chip).subsidy_per_hour > 0
    services.set_programme_active(Actor(finance_user), slug="xinchuang-2026", active=False, reason="Budget review")
    assert quote(chip=chip).subsidy_per_hour == 0
    services.set_programme_active(Actor(finance_user), slug="xinchuang-2026", active=True, reason="Approved")
    assert quote(chip=chip).subsidy_per_hour > 0
    assert list(AuditEntry.objects.order_by("pk").values_list("action", flat=True)) == [
        AuditAction.PROGRAMME_PAUSED,
        AuditAction.PROGRAMME_RESUMED,
    ]


def test_a_budget_can_change_but_never_below_what_was_spent(finance_user, xinchuang_subsidy):
    SubsidyProgramme.objects.filter(pk=xinchuang_subsidy.pk).update(spent=Decimal("100"))
    with pytest.raises(ServiceError, match="below what was already spent"):
        services.change_budget(Actor(finance_user), slug="xinchuang-2026", budget="99.99", reason="cut")
    services.change_budget(Actor(finance_user), slug="xinchuang-2026", budget="5000", reason="Top-up from the fund")
    assert SubsidyProgramme.objects.get(pk=xinchuang_subsidy.pk).budget == Decimal("5000")
    entry = AuditEntry.objects.get(action=AuditAction.PROGRAMME_BUDGET_CHANGED)
    assert entry.after == {"budget": "5000.00"} and entry.reason == "Top-up from the fund"


def test_a_new_programme_is_created_with_its_chips_and_audited(client, finance_user, catalog):
    client.force_login(finance_user)
    starts = timezone.localtime().replace(second=0, microsecond=0)
    response = client.post(
        reverse("ops:subsidies"),
        {
            "slug": "dcu-launch",
            "name": "DCU launch offer",
            "name_zh": "海光首发",
            "rate": "0.2",
            "chips": [catalog["dcu-z100"].pk],
            "starts_at": starts.strftime("%Y-%m-%dT%H:%M"),
            "budget": "10000",
            "eligibility": "everyone",
            "reason": "Launch",
        },
    )
    assert response.status_code == 302
    programme = SubsidyProgramme.objects.get(slug="dcu-launch")
    assert list(programme.chips.values_list("slug", flat=True)) == ["dcu-z100"]
    assert quote(chip=catalog["dcu-z100"]).programme.slug == "dcu-launch"
    assert AuditEntry.objects.get(action=AuditAction.PROGRAMME_CREATED).after["chips"] == ["dcu-z100"]


def test_a_bad_programme_form_shows_what_is_wrong(client, finance_user, catalog):
    client.force_login(finance_user)
    response = client.post(reverse("ops:subsidies"), {"slug": "x", "name": "X", "rate": "2", "eligibility": "nobody"})
    assert response.status_code == 400
    assert not SubsidyProgramme.objects.filter(slug="x").exists()


def test_the_audit_log_is_append_only(finance_user, owner, fund):
    fund(owner, "1")
    services.adjust_balance(Actor(finance_user), user_id=owner.public_id, amount="1", reason="x", idempotency_key=key())
    entry = AuditEntry.objects.get()
    entry.reason = "rewritten"
    with pytest.raises(AuditLogIsAppendOnly):
        entry.save()
    with pytest.raises(AuditLogIsAppendOnly):
        entry.delete()
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEntry.objects.update(reason="rewritten")
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEntry.objects.all().delete()


def test_the_audit_log_page_finds_entries_by_email_target_and_action(client, finance_user, owner, stranger, fund):
    for user in (owner, stranger):
        services.adjust_balance(
            Actor(finance_user), user_id=user.public_id, amount="3", reason=f"goodwill {user.pk}", idempotency_key=key()
        )
    client.force_login(finance_user)
    page = client.get(reverse("ops:audit"), {"q": str(stranger.public_id)}).content.decode()
    assert "stranger@example.com" in page and "owner@example.com" not in page
    page = client.get(reverse("ops:audit"), {"action": "node_drained"}).content.decode()
    assert "stranger@example.com" not in page
