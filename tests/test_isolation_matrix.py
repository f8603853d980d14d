"""The tenant-isolation matrix, generated from the URL conf (pages and every /api/v1/ route of the schema).

Every route that takes an object id is requested for a real object of the owner's by the owner, a teammate
(read-only token, shares nothing until teams land) and a stranger, with every method: the stranger and the
teammate get the same 404 as for a missing object (a read-only token may get its 403 first on a write), the owner
does not, and nobody gets a 500. Staff-only routes (``/ops/``, the admin) answer 404 to all three non-staff users.
A route the matrix cannot build an object for is listed in ``NOT_COVERED`` with the reason; a new id route that is
neither covered nor listed fails ``test_every_id_route_is_in_the_matrix_or_listed_with_a_reason``.
"""

import re
import uuid
from dataclasses import dataclass
from decimal import Decimal

import asyncssh
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services as console
from accounts import ssh_keys
from accounts.ops.audit import Actor
from billing import invoices, payments, wallet
from inference import services as endpoints
from inference import template_catalog as inference
from instances import launching
from instances import secrets as instance_secrets
from instances.models import WaitingLaunch
from instances.tests.fixtures import settle
from jobs import services as jobs
from marketplace.hub import services as hub
from marketplace.images import services as images
from marketplace.models import Image
from notifications import services as notifications
from storage import disks
from storage import mounts as hub_mounts
from storage import services as storage
from storage.tests.fixtures import store_file
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.catalog import load_hub
from tests.fixtures.factories import UserFactory

METHODS = ("get", "patch", "put", "post", "delete")
MISSING = "00000000-0000-4000-8000-000000000000"


@dataclass(frozen=True)
class Route:
    pattern: str
    name: str | None
    kwargs: tuple[str, ...]

    @property
    def is_api(self) -> bool:
        return self.pattern.startswith("api/v1/")


def _walk(resolver, prefix="", namespace=None):
    for item in resolver.url_patterns:
        if isinstance(item, URLResolver):
            ns = f"{namespace}:{item.namespace}" if namespace and item.namespace else item.namespace or namespace
            yield from _walk(item, prefix + str(item.pattern), ns)
        elif isinstance(item, URLPattern):
            name = f"{namespace}:{item.name}" if namespace and item.name else item.name
            yield prefix + str(item.pattern), name


def id_routes() -> list[Route]:
    """Every route of the URL conf with a path parameter (DRF's format-suffix twins aside)."""
    routes = []
    for pattern, name in _walk(get_resolver()):
        kwargs = tuple(a or b for a, b in re.findall(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>", pattern))
        if kwargs and "format" not in kwargs:
            routes.append(Route(pattern, name, kwargs))
    return routes


STAFF_PREFIXES = ("ops/", settings.ADMIN_URL)

# route name → the owner's object's ids for it (``o`` is the ``owned`` fixture).
COVERED = {
    "console:revoke-token": lambda o: {"public_id": o["token"].public_id},
    "console:delete-ssh-key": lambda o: {"public_id": o["ssh_key"].public_id},
    "instances:detail": lambda o: {"public_id": o["instance"].public_id},
    "instances:start": lambda o: {"public_id": o["instance"].public_id},
    "instances:stop": lambda o: {"public_id": o["instance"].public_id},
    "instances:release": lambda o: {"public_id": o["instance"].public_id},
    "instances:metrics": lambda o: {"public_id": o["instance"].public_id},
    "instances:training": lambda o: {"public_id": o["instance"].public_id},
    "instances:ports": lambda o: {"public_id": o["instance"].public_id},
    "instances:open-port": lambda o: {"public_id": o["instance"].public_id},
    "instances:auto-shutdown": lambda o: {"public_id": o["instance"].public_id},
    "instances:daily-power": lambda o: {"public_id": o["instance"].public_id},
    "api-instance-daily-power": lambda o: {"id": o["instance"].public_id},
    "instances:logs": lambda o: {"public_id": o["instance"].public_id},
    "instances:secret-replace": lambda o: {"name": o["secret"].name},
    "instances:secret-delete": lambda o: {"name": o["secret"].name},
    "instances:lab": lambda o: {"public_id": o["instance"].public_id, "path": "api/status"},
    "instances:lab-handoff": lambda o: {"public_id": o["instance"].public_id},
    "billing:sandbox-checkout": lambda o: {"public_id": o["topup"].public_id},
    "marketplace:hub-item": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "marketplace:hub-like": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "marketplace:hub-upload": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "marketplace:hub-card": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "marketplace:hub-from-storage": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "marketplace:hub-visibility": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "marketplace:save-instance": lambda o: {"instance_id": o["instance"].public_id},
    "marketplace:image": lambda o: {"slug": o["image"].slug},
    "marketplace:image-clone": lambda o: {"slug": o["image"].slug},
    "marketplace:image-publish": lambda o: {"slug": o["image"].slug},
    "marketplace:image-rate": lambda o: {"slug": o["image"].slug},
    "marketplace:image-family": lambda o: {"slug": o["image"].slug},
    "storage:folder": lambda o: {"public_id": o["folder"].public_id},
    "storage:rename": lambda o: {"public_id": o["file"].public_id},
    "storage:move": lambda o: {"public_id": o["file"].public_id},
    "storage:delete": lambda o: {"public_id": o["file"].public_id},
    "storage:download": lambda o: {"public_id": o["file"].public_id},
    "storage:disk-grow": lambda o: {"public_id": o["disk"].public_id},
    "storage:disk-attach": lambda o: {"public_id": o["disk"].public_id},
    "storage:disk-detach": lambda o: {"public_id": o["disk"].public_id},
    "storage:disk-delete": lambda o: {"public_id": o["disk"].public_id},
    "storage:instance-panel": lambda o: {"public_id": o["instance"].public_id},
    "storage:instance-mount": lambda o: {"public_id": o["instance"].public_id},
    "storage:instance-unmount": lambda o: {"public_id": o["instance"].public_id},
    "storage:instance-attach": lambda o: {"public_id": o["instance"].public_id},
    "storage:instance-detach": lambda o: {"public_id": o["instance"].public_id},
    "endpoints:detail": lambda o: {"public_id": o["endpoint"].public_id},
    "endpoints:chart": lambda o: {"public_id": o["endpoint"].public_id},
    "endpoints:create-key": lambda o: {"public_id": o["endpoint"].public_id},
    "endpoints:revoke-key": lambda o: {"public_id": o["endpoint"].public_id, "key_id": o["endpoint_key"].public_id},
    "endpoints:stop": lambda o: {"public_id": o["endpoint"].public_id},
    "endpoints:start": lambda o: {"public_id": o["endpoint"].public_id},
    "endpoints:release": lambda o: {"public_id": o["endpoint"].public_id},
    "endpoints:scale-to-zero": lambda o: {"public_id": o["endpoint"].public_id},
    "api-token-detail": lambda o: {"public_id": o["token"].public_id},
    "api-ssh-key-detail": lambda o: {"public_id": o["ssh_key"].public_id},
    "api-instance-detail": lambda o: {"id": o["instance"].public_id},
    "api-instance-release": lambda o: {"id": o["instance"].public_id},
    "api-instance-start": lambda o: {"id": o["instance"].public_id},
    "api-instance-stop": lambda o: {"id": o["instance"].public_id},
    "api-instance-training": lambda o: {"id": o["instance"].public_id},
    "api-instance-ssh": lambda o: {"id": o["instance"].public_id},
    "api-instance-logs": lambda o: {"id": o["instance"].public_id},
    "api-secret-detail": lambda o: {"name": o["secret"].name},
    "api-instance-mounts": lambda o: {"id": o["instance"].public_id},
    "api-instance-mount": lambda o: {"id": o["instance"].public_id, "org": "THUDM", "name": "chatglm3-6b"},
    "api-topup-detail": lambda o: {"public_id": o["topup"].public_id},
    "notifications:channel": lambda o: {"public_id": o["channel"].public_id},
    "notifications:channel-test": lambda o: {"public_id": o["channel"].public_id},
    "notifications:channel-delete": lambda o: {"public_id": o["channel"].public_id},
    "api-notification-channel-detail": lambda o: {"public_id": o["channel"].public_id},
    "api-notification-channel-test": lambda o: {"public_id": o["channel"].public_id},
    "api-notification-channel-deliveries": lambda o: {"public_id": o["channel"].public_id},
    "billing:invoice-pdf": lambda o: {"public_id": o["invoice"].public_id},
    "api-invoice-pdf": lambda o: {"public_id": o["invoice"].public_id},
    "api-storage-upload": lambda o: {"public_id": o["upload"].public_id},
    "api-storage-entry-detail": lambda o: {"public_id": o["file"].public_id},
    "api-storage-entry-download": lambda o: {"public_id": o["file"].public_id},
    "api-disk-detail": lambda o: {"id": o["disk"].public_id},
    "api-disk-attach": lambda o: {"id": o["disk"].public_id},
    "api-disk-detach": lambda o: {"id": o["disk"].public_id},
    "api-disk-grow": lambda o: {"id": o["disk"].public_id},
    "api-hub-like": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "api-hub-item": lambda o: dict(zip(("org", "name"), o["hub"].repo.split("/"), strict=True)),
    "api-image": lambda o: {"key": o["image"].slug},
    "api-image-clone": lambda o: {"key": o["image"].slug},
    "api-image-publish": lambda o: {"key": o["image"].slug},
    "api-image-ratings": lambda o: {"key": o["image"].slug},
    "api-image-review": lambda o: {"key": o["image"].slug},
    "api-endpoint": lambda o: {"id": o["endpoint"].public_id},
    "api-endpoint-stop": lambda o: {"id": o["endpoint"].public_id},
    "api-endpoint-start": lambda o: {"id": o["endpoint"].public_id},
    "api-endpoint-keys": lambda o: {"id": o["endpoint"].public_id},
    "api-endpoint-key": lambda o: {"id": o["endpoint"].public_id, "key_id": o["endpoint_key"].public_id},
    "teams:detail": lambda o: {"slug": o["team"].slug},
    "teams:invite": lambda o: {"slug": o["team"].slug},
    "teams:member-role": lambda o: {"slug": o["team"].slug, "user_id": o["team"].created_by.public_id},
    "teams:member-remove": lambda o: {"slug": o["team"].slug, "user_id": o["team"].created_by.public_id},
    "teams:invitation-revoke": lambda o: {"slug": o["team"].slug, "invitation_id": o["invitation"].public_id},
    "api-team": lambda o: {"slug": o["team"].slug},
    "api-team-invite": lambda o: {"slug": o["team"].slug},
    "api-team-member": lambda o: {"slug": o["team"].slug, "user_id": o["team"].created_by.public_id},
    "jobs:detail": lambda o: {"public_id": o["job"].public_id},
    "jobs:cancel": lambda o: {"public_id": o["job"].public_id},
    "jobs:rerun": lambda o: {"public_id": o["job"].public_id},
    "api-job-detail": lambda o: {"id": o["job"].public_id},
    "api-job-cancel": lambda o: {"id": o["job"].public_id},
    "api-job-rerun": lambda o: {"id": o["job"].public_id},
    "api-job-logs": lambda o: {"id": o["job"].public_id},
    "instances:waiting": lambda o: {"public_id": o["waiting"].public_id},
    "instances:waiting-cancel": lambda o: {"public_id": o["waiting"].public_id},
    "api-instance-waiting": lambda o: {"id": o["waiting"].public_id},
    "jobs:schedule": lambda o: {"public_id": o["schedule"].public_id},
    "jobs:schedule-suspend": lambda o: {"public_id": o["schedule"].public_id},
    "jobs:schedule-resume": lambda o: {"public_id": o["schedule"].public_id},
    "jobs:schedule-delete": lambda o: {"public_id": o["schedule"].public_id},
    "api-job-schedule-detail": lambda o: {"id": o["schedule"].public_id},
    "api-job-schedule-runs": lambda o: {"id": o["schedule"].public_id},
    "api-job-schedule-suspend": lambda o: {"id": o["schedule"].public_id},
    "api-job-schedule-resume": lambda o: {"id": o["schedule"].public_id},
}

# Routes with a path parameter that is not an object of a user's, and why the matrix leaves them out.
NOT_COVERED = {
    "api-chip-detail": "the public chip catalogue: the same for everyone",
    "docs": "the documentation site's files: the same for everyone (accounts/tests/test_docs.py)",
    "api-zone-detail": "the public zone catalogue: the same for everyone",
    "api-spec-detail": "the public spec catalogue: the same for everyone",
    "inference:template": "public inference templates: the same for everyone",
    "endpoints:deploy": "takes a public template slug; the endpoint it creates is covered above",
    "openai-v1": "the OpenAI-compatible proxy, authenticated by endpoint keys (tested in instances/tests)",
    "marketplace:review-decide": "staff review: non-staff get 404 whatever the slug (test_review_access.py)",
    "api-agent-reports": "authenticated by the instance agent's own token, never a user's (instances/tests)",
    "account_confirm_email": "allauth's e-mail confirmation key: a secret, not an object id",
    "account_reset_password_from_key": "allauth's password-reset key: a secret, not an object id",
    "billing:member-budget": "a member's budget, set in the team's context only (teams/tests/test_team_budgets.py)",
    "teams:invitation": "a signed invitation link: a secret, not an object id (teams/tests/test_teams.py)",
    None: "the API's catch-all (api/v1/<path>) and the admin's catch-all: JSON/HTML 404 for anything",
    # Old addresses kept for bookmarks: the same 301 for everyone, to the routes the matrix covers above.
    "moved:hub-item": "an old address: a redirect to marketplace:hub-item",
    "moved:hub-card": "an old address: a redirect to marketplace:hub-card",
    # The Hugging Face Hub API: a private repository is "not found" to another user's token and to no token, and
    # writes are refused to anyone but its owner (marketplace/tests/test_hf_api.py, test_hub_publishing.py).
    "hub-api-info": "the Hub API, by repository name (marketplace/tests)",
    "hub-api-revision": "the Hub API, by repository name (marketplace/tests)",
    "hub-api-tree": "the Hub API, by repository name (marketplace/tests)",
    "hub-api-preupload": "the Hub API, by repository name: its owner's token only (marketplace/tests)",
    "hub-api-commit": "the Hub API, by repository name: its owner's token only (marketplace/tests)",
    "hub-lfs-batch": "the Hub API, by repository name: its owner's token only (marketplace/tests)",
    "hub-lfs-upload": "a signed upload address for one file: the ticket is the permission (marketplace/tests)",
    "hub-lfs-verify": "by content hash: answers only for the caller's own uploads (marketplace/tests)",
    "hub-resolve": "the Hub API's downloads, by repository name (marketplace/tests)",
    "hub-resolve-dataset": "the Hub API's downloads, by repository name (marketplace/tests)",
    "hub-api-settings": "the Hub API, by repository name: its owner's token only (marketplace/tests)",
    "hub-repo-page": "a redirect to marketplace:hub-item, the same for everyone",
    "hub-api-list": "the Hub API's lists, by kind: public repositories and the caller's own (marketplace/tests)",
    "hub-xet-write-token": "the Hub API, by repository name: its owner's read-write token only (marketplace/tests)",
    "hub-xet-xorb": "the Xet CAS: a xorb is kept under its uploader and read for no one else (marketplace/tests)",
}


def _name_of(route: Route) -> str | None:
    return route.name


def _staff_only(route: Route) -> bool:
    return route.pattern.startswith(STAFF_PREFIXES)


def test_every_id_route_is_in_the_matrix_or_listed_with_a_reason():
    unknown = [
        route.pattern
        for route in id_routes()
        if not _staff_only(route) and route.name not in COVERED and route.name not in NOT_COVERED
    ]
    assert unknown == [], "new routes with an id: add them to COVERED (with an object) or NOT_COVERED (with a reason)"
    stale = set(COVERED) - {route.name for route in id_routes()}
    assert stale == set(), "routes in the matrix that no longer exist"


# -- the owner's objects -------------------------------------------------------------------------------------------


def _fund(user, amount="500"):

    wallet.adjust_balance(
        user=user, amount=Decimal(amount), reason="tests", staff=None, idempotency_key=f"matrix:{user.pk}"
    )


@pytest.fixture
def owned(owner, catalog, instant, eager_tasks, cloud_storage, settings):
    """One of everything the owner can own: an instance, a disk, a folder, a file, an upload in progress, an API
    token, a secret, a private hub model, a private image, a sandbox top-up, an issued invoice, an inference endpoint
    with a key, and a team with an open invitation."""

    _fund(owner)
    load_hub()
    objects = {}
    objects["instance"] = launching.launch(
        owner, launching.LaunchRequest(name="train-1", image="mindspore-2.3-cann8", chip="ascend-910b")
    )
    settle()
    objects["instance"].refresh_from_db()
    objects["disk"] = disks.create(owner, name="data", size_gb=20, zone=objects["instance"].zone)
    disks.attach(owner, objects["disk"].public_id, objects["instance"].public_id)
    hub_mounts.mount(owner, objects["instance"], "THUDM/chatglm3-6b")
    objects["folder"] = storage.make_folders(owner, "/datasets")
    objects["file"] = store_file(owner, "/datasets/train.jsonl", b'{"q": 1}\n')
    objects["upload"] = storage.create_upload(owner, folder_path="/", filename="big.bin", length=10)
    objects["token"] = console.create_api_token(owner, name="ci", scope="read").token
    objects["ssh_key"] = ssh_keys.add_ssh_key(owner, public_key=_public_key())
    objects["secret"] = instance_secrets.put_secret(owner, "HF_TOKEN", "hf-matrix-value")[0]
    objects["hub"] = hub.save_item(repo="owner-lab/secret-model", owner=owner, visibility="private")
    objects["image"] = images.clone_to_mine(owner, Image.objects.get(slug="mindspore-2.3"))
    objects["topup"] = payments.start_topup(owner, Decimal("50"), base_url="http://testserver")
    paid = payments.start_topup(owner, Decimal("20"), base_url="http://testserver")
    payments.pay_sandbox(owner, paid.public_id)

    requested = invoices.request(owner, kind="general", title="Matrix lab", amount="20")
    pdf = SimpleUploadedFile("f.pdf", b"%PDF-1.4\n%%EOF\n")
    objects["invoice"] = invoices.issue(
        Actor(UserFactory(email="finance@example.com", is_staff=True)),
        requested.public_id,
        number="2411000012345678",
        pdf=pdf,
    )

    inference.load()
    endpoint = endpoints.deploy(owner, endpoints.DeployRequest(template="qwen2.5-0.5b-instruct-vllm"))
    settle()
    objects["endpoint"] = endpoint
    objects["endpoint_key"] = endpoints.create_key(endpoint, name="matrix").key

    # An e-mail channel: its test sends go to the test outbox, never to a network address.
    objects["channel"] = notifications.create_channel(
        owner, notifications.ChannelSpec(kind="email", name="on-call", email="oncall@example.com")
    )
    objects["team"] = teams.create_team(owner, name="Matrix lab", slug="matrix-lab")
    objects["invitation"] = teams.invite(teams.membership(owner, "matrix-lab"), "invitee@example.com", "developer")

    objects["job"] = jobs.submit(
        owner, jobs.JobRequest(name="matrix", image="mindspore-2.3-cann8", command="true", backend="npu")
    )
    from jobs import schedules

    request = jobs.JobRequest(name="matrix", image="mindspore-2.3-cann8", command="true", backend="npu")
    objects["schedule"] = schedules.create(owner, schedules.ScheduleRequest(job=request, cron="@daily"))
    objects["waiting"] = WaitingLaunch.objects.create(
        owner=owner, name="waiting", request={}, family="npu", cards=8, queued_at=timezone.now()
    )
    return objects


def _public_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519", comment="matrix").export_public_key().decode()


def _clients(owner, teammate, stranger, api: bool):

    clients = {}
    for persona, user, scope in (
        ("owner", owner, "read_write"),
        ("teammate", teammate, "read"),
        ("stranger", stranger, "read_write"),
    ):
        client = APIClient()
        if api:
            client.credentials(
                HTTP_AUTHORIZATION=f"Bearer {console.create_api_token(user, name='m', scope=scope).plaintext}"
            )
        else:
            client.force_login(user)
        clients[persona] = client
    return clients


def _call(client, method, url, body=None):
    if method == "get":
        return client.get(url).status_code
    if method == "post" and not url.startswith("/api/"):
        return client.post(url, body or {}).status_code  # a page form: form-encoded
    return getattr(client, method)(url, body or {}, format="json").status_code


# Request bodies that name the owner's other objects, so that a route gets past its input check to the lookup.
BODIES = {
    "storage:instance-detach": lambda o: {"disk": str(o["disk"].public_id)},
    "storage:instance-unmount": lambda o: {"repo": "THUDM/chatglm3-6b"},
}


COVERED_ROUTES = sorted({r.name for r in id_routes() if r.name in COVERED})


@pytest.mark.parametrize("name", COVERED_ROUTES)
def test_strangers_and_teammates_get_404_on_the_owners_objects_and_nobody_gets_500(
    name, owned, owner, teammate, stranger
):
    route = next(r for r in id_routes() if r.name == name)
    url = reverse(name, kwargs=COVERED[name](owned))
    missing = reverse(name, kwargs={k: MISSING if "id" in k else "no-such" for k in route.kwargs})
    clients = _clients(owner, teammate, stranger, api=route.is_api)
    body = BODIES.get(name, lambda o: None)(owned)
    if name == "api-storage-upload":
        for client in clients.values():
            client.credentials(**client._credentials, HTTP_TUS_RESUMABLE="1.0.0")
    seen = {}
    for method in METHODS:
        # Others first, the owner last: the owner's request may change or delete the object.
        stranger_status = _call(clients["stranger"], method, url, body)
        missing_status = _call(clients["stranger"], method, missing, body)
        teammate_status = _call(clients["teammate"], method, url, body)
        owner_status = _call(clients["owner"], method, url, body)
        seen[method] = (owner_status, teammate_status, stranger_status)
        assert 500 not in seen[method], f"{method.upper()} {url}: {seen[method]}"
        assert stranger_status == missing_status, (
            f"{method.upper()} {url}: stranger {stranger_status} ≠ missing {missing_status}"
        )
        # A read-only token is refused a write (403) before anything is looked up: that says nothing either.
        read_only_refusal = {403} if route.is_api and method != "get" else set()
        if owner_status == 405:
            assert stranger_status in {404, 405}, f"{method.upper()} {url}: {seen}"
            assert teammate_status in {404, 405} | read_only_refusal, f"{method.upper()} {url}: {seen}"
            continue
        # Input checked before any lookup (400, or tus's 412/415) is the same answer for every id: no oracle either.
        same_check = stranger_status == owner_status and stranger_status in {400, 412, 415}
        assert stranger_status == 404 or same_check, f"{method.upper()} {url}: the stranger got {stranger_status}"
        assert teammate_status in {404, stranger_status} | read_only_refusal, (
            f"{method.upper()} {url}: the teammate got {teammate_status}"
        )
    first_allowed = next((owner for owner, _, _ in seen.values() if owner != 405), None)
    assert first_allowed not in {None, 404}, f"{url}: the owner cannot reach their own object: {seen}"


STAFF_ROUTES = sorted({r.pattern for r in id_routes() if _staff_only(r)})


def _fill(pattern: str) -> str:
    """A concrete URL for a staff route: every parameter filled with something plausible."""
    url = re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: MISSING if m.group(1) == "uuid" else "1", pattern)
    url = re.sub(r"\(\?P<\w+>[^)]*\)", "console", url)
    return "/" + url.replace("^", "").replace("$", "")


def test_staff_only_routes_answer_404_to_every_non_staff_user(owner, teammate, stranger):
    pages = _clients(owner, teammate, stranger, api=False)
    for pattern in STAFF_ROUTES:
        url = _fill(pattern)
        for persona, client in pages.items():
            for method in ("get", "post"):
                status = _call(client, method, url)
                assert status == 404, f"{persona} {method.upper()} {url} → {status}"


def test_a_made_up_id_is_404_for_everyone_on_the_api(owner_api, stranger_api):
    for client in (owner_api, stranger_api):
        for url in (f"/api/v1/instances/{uuid.uuid4()}/", f"/api/v1/disks/{uuid.uuid4()}/", "/api/v1/instances/x/"):
            response = client.get(url)
            assert response.status_code == 404 and response.json()["code"] == "not_found"


# -- a team's objects ----------------------------------------------------------------------------------------------

# The routes of what a team owns (its instances, disks, cloud storage, endpoints and images), with every persona a
# team brings: a member with each role (working in the team's context: the console's switch, or a team's token
# where the route takes one), a member of another team and a former member (each in their own context).
TEAM_ROUTES = sorted(
    name
    for name in COVERED_ROUTES
    if name.startswith(
        ("instances:", "api-instance-", "storage:", "api-disk-", "api-storage-", "endpoints:", "api-endpoint")
    )
    or name
    in {
        "marketplace:image",
        "marketplace:image-clone",
        "marketplace:image-publish",
        "marketplace:image-family",
        "marketplace:save-instance",
        "api-image",
        "api-image-clone",
        "api-image-publish",
    }
    if name not in {"instances:secret-replace", "instances:secret-delete"}
)


@pytest.fixture
def team_owned(owner, catalog, instant, eager_tasks, cloud_storage):
    """A team with one of everything a team owns: a running instance with a disk attached, a folder, a file and an
    upload in progress in the team's cloud storage, an endpoint with a key, and an image; a member of each role, a
    member of another team and a former member."""

    team = teams.create_team(owner, name="Matrix lab", slug="matrix-lab")
    account = team.account
    _fund(account)
    load_hub()
    inference.load()
    objects = {"team": team}
    objects["instance"] = launching.launch(
        account, launching.LaunchRequest(name="team-1", image="mindspore-2.3-cann8", chip="ascend-910b"), by=owner
    )
    settle()
    objects["instance"].refresh_from_db()
    objects["disk"] = disks.create(account, name="team-data", size_gb=20, zone=objects["instance"].zone, by=owner)
    disks.attach(owner, objects["disk"].public_id, objects["instance"].public_id)
    objects["folder"] = storage.make_folders(account, "/datasets")
    objects["file"] = store_file(account, "/datasets/train.jsonl", b'{"q": 1}\n')
    objects["upload"] = storage.create_upload(account, folder_path="/", filename="big.bin", length=10)
    endpoint = endpoints.deploy(account, endpoints.DeployRequest(template="qwen2.5-0.5b-instruct-vllm"), by=owner)
    settle()
    objects["endpoint"] = endpoint
    objects["endpoint_key"] = endpoints.create_key(endpoint, name="matrix").key
    objects["image"] = images.clone_to_mine(account, Image.objects.get(slug="mindspore-2.3"))
    objects["waiting"] = WaitingLaunch.objects.create(
        owner=account, launched_by=owner, name="waiting", request={}, family="npu", cards=8, queued_at=timezone.now()
    )

    personas = {"owner": owner}
    for role in (Role.ADMIN, Role.DEVELOPER, Role.BILLING, Role.READ_ONLY):
        personas[role] = UserFactory(email=f"{role}@example.com")
        Membership.objects.create(team=team, user=personas[role], role=role)
    other = teams.create_team(UserFactory(email="other-owner@example.com"), name="Other", slug="other-lab")
    personas["other team"] = other.created_by
    personas["former"] = UserFactory(email="former@example.com")
    Membership.objects.create(team=team, user=personas["former"], role=Role.DEVELOPER)
    teams.remove_member(teams.membership(owner, "matrix-lab"), str(personas["former"].public_id))
    objects["personas"] = personas
    return objects


def _team_scoped(url: str) -> bool:
    match = resolve(url)
    view = getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)
    return getattr(view, "team_scoped", False)


def _persona_client(user, api: bool, team=None, url: str = ""):
    """A persona's client: in ``team``'s context when given (the console's switch; a team's token on an API route
    that takes one), else their own."""

    client = APIClient()
    if api:
        scoped = team if team is not None and _team_scoped(url) else None
        token = console.create_api_token(user, name="m", scope="read_write", team=scoped).plaintext
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    else:
        client.force_login(user)
        if team is not None:
            assert client.post(reverse("teams:switch"), {"team": team.slug}).status_code == 302
    return client


# Entering the machine (JupyterLab, SSH) and preparing an image from it are acting on it, even by a GET.
ACTING_GETS = {"instances:lab", "instances:lab-handoff", "api-instance-ssh", "marketplace:save-instance"}
MEMBERS = ("owner", "admin", "developer", "billing", "read_only")


@pytest.mark.parametrize("name", TEAM_ROUTES)
def test_a_teams_object_is_read_by_every_member_changed_by_operators_and_reached_by_nobody_else(name, team_owned):
    route = next(r for r in id_routes() if r.name == name)
    url = reverse(name, kwargs=COVERED[name](team_owned))
    missing = reverse(name, kwargs={k: MISSING if "id" in k else "no-such" for k in route.kwargs})
    people = team_owned["personas"]
    team = team_owned["team"]
    clients = {
        persona: _persona_client(user, route.is_api, team if persona in MEMBERS else None, url)
        for persona, user in people.items()
    }
    outsider = _persona_client(people["former"], route.is_api)
    body = BODIES.get(name, lambda o: None)(team_owned)
    for method in ("get", "post", "delete"):
        missing_status = _call(outsider, method, missing, body)
        outsiders = {p: _call(clients[p], method, url, body) for p in ("former", "other team")}
        assert set(outsiders.values()) <= {missing_status}, f"{method.upper()} {url}: {outsiders} vs {missing_status}"
        watchers = {p: _call(clients[p], method, url, body) for p in ("billing", "read_only")}
        assert 500 not in watchers.values(), f"{method.upper()} {url}: {watchers}"
        if method == "get" and name not in ACTING_GETS:
            # A role that may see the team's objects reads what an operator reads.
            operator = _call(clients["developer"], method, url)
            assert set(watchers.values()) == {operator}, f"GET {url}: {watchers} vs the developer's {operator}"
            assert operator != 404, f"GET {url}: a member cannot read it"
        else:
            # Seeing is not acting: refused (403), or the same answer as for an id that does not exist.
            assert set(watchers.values()) <= {403, 405, missing_status}, f"{method.upper()} {url}: {watchers}"
