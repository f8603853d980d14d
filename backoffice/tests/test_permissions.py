"""Who may open each back-office page and take each action: ops, finance, staff with no role, a signed-in user
who is not staff, and an anonymous visitor. Non-staff never learn the back office exists (404, on the admin too);
staff without the role get 403; the role's holders get through."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from accounts import verification
from accounts.ops.choices import AuditAction
from accounts.ops.models import AuditEntry
from catalog.models import Node
from instances.tests.fixtures import settle
from marketplace.images import services as image_services

pytestmark = pytest.mark.django_db

PERSONAS = ["ops", "finance", "plain_staff", "non_staff", "anonymous"]
CODE = "91350100M000100Y43"


@pytest.fixture
def personas(client, ops_user, finance_user, plain_staff, stranger):
    users = {"ops": ops_user, "finance": finance_user, "plain_staff": plain_staff, "non_staff": stranger}

    def login_as(name):
        client.logout()
        if name in users:
            client.force_login(users[name])
        return client

    return login_as


@pytest.fixture
def objects(launch, owner, community_image):
    """One of everything an action needs: a node, a running instance, a user, a pending application and a
    community image waiting for review."""

    instance = launch(chip="ascend-910b", cards=1)
    settle()
    node = Node.objects.select_related("zone").order_by("pk").first()
    application = verification.apply(
        owner, company_name="Kunpeng AI", licence_number=CODE, contact_name="Li Lei", contact_phone="13800138000"
    )
    image = image_services.publish(owner, community_image(listed=False, name="Waiting image"))
    return {"instance": instance, "node": node, "user": owner, "application": application, "image": image}


def _actions(o):
    node, user, instance = o["node"], o["user"], o["instance"]
    soon = timezone.localtime() + timezone.timedelta(hours=1)
    return [
        # (name, method, url, data, who may)
        ("overview", "get", reverse("ops:index"), None, {"ops", "finance", "plain_staff"}),
        ("capacity", "get", reverse("ops:capacity"), None, {"ops"}),
        ("drain node", "post", reverse("ops:drain-node", args=[node.zone.slug, node.name]), {"reason": "x"}, {"ops"}),
        ("return node", "post", reverse("ops:return-node", args=[node.zone.slug, node.name]), {}, {"ops"}),
        ("revenue", "get", reverse("ops:revenue"), None, {"finance"}),
        ("reconciliation CSV", "get", reverse("ops:reconciliation-csv") + "?month=2026-01", None, {"finance"}),
        ("price list", "get", reverse("ops:prices"), None, {"finance"}),
        (
            "add price",
            "post",
            reverse("ops:prices"),
            {"chip": "ascend-910b", "per_hour": "2.20", "effective_from": soon.strftime("%Y-%m-%dT%H:%M")},
            {"finance"},
        ),
        ("subsidy programmes", "get", reverse("ops:subsidies"), None, {"finance"}),
        ("invoices", "get", reverse("ops:invoices"), None, {"finance"}),
        (
            "create programme",
            "post",
            reverse("ops:subsidies"),
            {
                "slug": "new-prog",
                "name": "New",
                "rate": "0.05",
                "starts_at": soon.strftime("%Y-%m-%dT%H:%M"),
                "eligibility": "everyone",
            },
            {"finance"},
        ),
        (
            "pause programme",
            "post",
            reverse("ops:pause-programme", args=["xinchuang-2026"]),
            {"reason": "x"},
            {"finance"},
        ),
        (
            "resume programme",
            "post",
            reverse("ops:resume-programme", args=["xinchuang-2026"]),
            {"reason": "x"},
            {"finance"},
        ),
        (
            "change budget",
            "post",
            reverse("ops:programme-budget", args=["xinchuang-2026"]),
            {"budget": "900000", "reason": "x"},
            {"finance"},
        ),
        ("review queues", "get", reverse("ops:reviews"), None, {"ops"}),
        (
            "review verification",
            "post",
            reverse("ops:review-verification", args=[o["application"].public_id]),
            {"decision": "approve"},
            {"ops"},
        ),
        (
            "review image",
            "post",
            reverse("ops:review-image", args=[o["image"].public_id]),
            {"decision": "approve"},
            {"ops"},
        ),
        ("users", "get", reverse("ops:users"), None, {"ops", "finance"}),
        ("user page", "get", reverse("ops:user", args=[user.public_id]), None, {"ops", "finance"}),
        (
            "adjust balance",
            "post",
            reverse("ops:adjust-balance", args=[user.public_id]),
            {"amount": "5", "reason": "goodwill", "idempotency_key": "7d8f3b0e-1f4a-4c59-9a37-5d0d5b8f1a11"},
            {"finance"},
        ),
        ("force-stop", "post", reverse("ops:force-stop", args=[instance.public_id]), {"reason": "incident"}, {"ops"}),
        ("audit log", "get", reverse("ops:audit"), None, {"ops", "finance"}),
    ]


def test_every_ops_page_and_action_answers_each_persona_as_its_role_allows(personas, objects):
    for name, method, url, data, allowed in _actions(objects):
        for persona in PERSONAS:
            client = personas(persona)
            response = getattr(client, method)(url, data) if data is not None else getattr(client, method)(url)
            if persona in allowed:
                assert response.status_code in (200, 302), (name, persona, response.status_code)
                _assert_done(name, objects, persona)
            elif persona in ("non_staff", "anonymous"):
                assert response.status_code == 404, (name, persona, response.status_code)
            else:
                assert response.status_code == 403, (name, persona, response.status_code)


def _assert_done(name, objects, who):
    """The review actions really decided (a 302 is also what a refusal inside the action answers)."""
    if name == "review image":
        objects["image"].refresh_from_db()
        assert objects["image"].review_state == "listed", who
        assert AuditEntry.objects.filter(action=AuditAction.IMAGE_APPROVED).count() == 1, who


def test_a_refused_action_changes_nothing_and_writes_no_audit_row(personas, objects):
    node = objects["node"]
    personas("finance").post(reverse("ops:drain-node", args=[node.zone.slug, node.name]), {"reason": "x"})
    adjustment = {"amount": "5", "reason": "x", "idempotency_key": "7d8f3b0e-1f4a-4c59-9a37-5d0d5b8f1a11"}
    personas("ops").post(reverse("ops:adjust-balance", args=[objects["user"].public_id]), adjustment)
    personas("finance").post(reverse("ops:force-stop", args=[objects["instance"].public_id]), {"reason": "x"})

    node.refresh_from_db()
    objects["instance"].refresh_from_db()
    assert node.drained is False
    assert objects["instance"].status == "running"
    assert not AuditEntry.objects.exists()


def test_a_superuser_may_do_everything(client, superuser, objects):
    client.force_login(superuser)
    for name, method, url, data, _allowed in _actions(objects):
        response = getattr(client, method)(url, data) if data is not None else getattr(client, method)(url)
        assert response.status_code in (200, 302), (name, response.status_code)
        _assert_done(name, objects, "superuser")


@pytest.mark.parametrize("path", ["/admin/", "/admin/login/", "/admin/billing/ledgertransaction/", "/admin/nope/"])
def test_the_admin_answers_404_to_non_staff_and_anonymous_visitors(client, stranger, path):
    assert client.get(path).status_code == 404
    client.force_login(stranger)
    assert client.get(path).status_code == 404


def test_staff_reach_the_admin_and_see_only_what_their_role_may_view(client, finance_user, ops_user):
    client.force_login(finance_user)
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/billing/ledgertransaction/").status_code == 200
    assert client.get("/admin/instances/instance/").status_code == 403
    client.force_login(ops_user)
    assert client.get("/admin/instances/instance/").status_code == 200
    assert client.get("/admin/billing/ledgertransaction/").status_code == 403


def test_the_review_queues_link_shows_for_either_review_role(client, plain_staff, finance_user):

    link = f'href="{reverse("ops:reviews")}"'
    client.force_login(finance_user)
    assert link not in client.get(reverse("ops:index")).content.decode()
    plain_staff.user_permissions.add(Permission.objects.get(content_type__app_label="console", codename="review_image"))
    client.force_login(plain_staff)
    assert link in client.get(reverse("ops:index")).content.decode()
    assert client.get(reverse("ops:reviews")).status_code == 200
