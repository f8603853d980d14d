"""Hub mounts: read-only at /root/public/<repo> or /root/datasets/<repo>, metadata handed to the backend (never a
copy), at launch or on a running instance, only of items the user may see; /root/shared in every instance."""

import pytest

from core.errors import Conflict, ServiceError
from instances import lifecycle
from instances.backends import get_backend
from instances.models import SimulatedJob
from instances.tests.fixtures import settle
from marketplace.hub import repos as hub_repos
from marketplace.hub import services as hub_services
from marketplace.models import HubItem
from storage import mounts as hub_mounts
from storage.models import HubMount


@pytest.fixture
def hub(db):
    chatglm = hub_services.save_item(
        repo="THUDM/chatglm3-6b", summary_zh="ChatGLM3 中文对话模型", task="text-generation", size_bytes=12 * 10**9
    )
    alpaca = hub_services.save_item(repo="shibing624/alpaca-zh", kind="dataset", summary_zh="中文指令数据")
    return {"chatglm": chatglm, "alpaca": alpaca}


@pytest.fixture
def running(launch):
    def make(**fields):
        instance = launch(**fields)
        settle()
        instance.refresh_from_db()
        return instance

    return make


def _mounts(instance) -> list[str]:
    return SimulatedJob.objects.get(instance_id=instance.public_id).mounts


def test_mounting_a_model_into_a_running_instance_hands_metadata_to_the_backend(owner, hub, running):
    instance = running()
    made = hub_mounts.mount(owner, instance, "THUDM/chatglm3-6b")
    assert made.target == "/root/public/THUDM/chatglm3-6b"
    assert "THUDM/chatglm3-6b:/root/public/THUDM/chatglm3-6b" in _mounts(instance)
    assert HubItem.objects.get(repo="THUDM/chatglm3-6b").mount_count == 1

    hub_mounts.unmount(owner, instance, "THUDM/chatglm3-6b")
    assert "THUDM/chatglm3-6b:/root/public/THUDM/chatglm3-6b" not in _mounts(instance)
    assert not HubMount.objects.exists()


def test_datasets_mount_under_root_datasets_and_twice_is_a_conflict(owner, hub, running):
    instance = running()
    assert hub_mounts.mount(owner, instance, "shibing624/alpaca-zh").target == "/root/datasets/shibing624/alpaca-zh"
    with pytest.raises(Conflict):
        hub_mounts.mount(owner, instance, "shibing624/alpaca-zh")


def test_every_instance_gets_the_users_cloud_storage_at_root_shared(owner, running):
    instance = running()
    assert f"cloudstorage/{owner.public_id}:/root/shared" in _mounts(instance)


def test_a_launch_mounts_the_chosen_items_before_the_machine_is_up(owner, hub, running):
    instance = running(mounts=["THUDM/chatglm3-6b", "shibing624/alpaca-zh"])
    mounts = _mounts(instance)
    assert "THUDM/chatglm3-6b:/root/public/THUDM/chatglm3-6b" in mounts
    assert "shibing624/alpaca-zh:/root/datasets/shibing624/alpaca-zh" in mounts
    assert HubItem.objects.get(repo="THUDM/chatglm3-6b").mount_count == 1


def test_a_launch_naming_an_unknown_or_someone_elses_private_item_is_refused_before_anything_is_reserved(
    owner, stranger, hub, launch
):
    hub_services.save_item(repo="stranger/secret", owner=stranger, visibility="private")
    for repo in ("nobody/nothing", "stranger/secret"):
        with pytest.raises(ServiceError) as refused:
            launch(mounts=[repo])
        assert refused.value.status == 400 and repo in str(refused.value.message)
    assert not owner.instances.exists()


def test_a_user_mounts_their_own_private_item(owner, running):
    hub_services.save_item(repo="owner/private-model", owner=owner, visibility="private")
    instance = running()
    assert hub_mounts.mount(owner, instance, "owner/private-model").target == "/root/public/owner/private-model"


def test_releasing_an_instance_ends_its_mounts(owner, hub, running):
    instance = running(mounts=["THUDM/chatglm3-6b"])
    lifecycle.release(instance)
    settle()
    assert not HubMount.objects.exists()
    instance.refresh_from_db()
    with pytest.raises(Conflict):
        hub_mounts.mount(owner, instance, "THUDM/chatglm3-6b")


def test_two_users_mounting_one_repository_each_see_their_own_instance_on_its_page(
    client, owner, stranger, hub, running
):
    # Given two users whose instances mount the same public model
    pages = {}
    for user in (owner, stranger):
        instance = running(user=user, name=f"box-{user.pk}")
        hub_mounts.mount(user, instance, "THUDM/chatglm3-6b")
        pages[user] = instance
    # When each opens their instance's page, one after the other
    for user, instance in pages.items():
        client.force_login(user)
        page = client.get(instance.get_absolute_url()).content.decode()
        panel_url = f"/storage/instances/{instance.public_id}/attachments/"
        assert f'hx-get="{panel_url}"' in page  # the panel loads after the page
        html = client.get(panel_url).content.decode()
        # Then its unmount button acts on their own instance, never on the other user's
        other = next(i for u, i in pages.items() if u != user)
        assert f"/{instance.public_id}/" in html and 'data-repo="THUDM/chatglm3-6b"' in html
        assert str(other.public_id) not in html


def test_a_takedown_hands_every_mount_over_again_and_one_machine_that_fails_keeps_no_other_from_it(
    owner, hub, running, monkeypatch, django_capture_on_commit_callbacks
):
    # Given two running instances that mount a model, the first of whose machines fails when handed it again
    first, second = running(name="first"), running(name="second")
    for instance in (first, second):
        hub_mounts.mount(owner, instance, "THUDM/chatglm3-6b")
    backend = type(get_backend(first.backend_name))
    handed, real_mount = [], backend.mount

    def mount(self, instance, source, target):
        handed.append(instance.pk)
        if instance.pk == first.pk:
            raise RuntimeError("the node is gone")
        real_mount(self, instance, source, target)

    monkeypatch.setattr(backend, "mount", mount)

    # When the repository is taken down
    with django_capture_on_commit_callbacks(execute=True):
        hub_repos.take_down(hub["chatglm"], "a complaint")

    # Then both machines were handed it again, the second despite the first's failure, and the mounts stay listed
    assert sorted(handed) == sorted([first.pk, second.pk])
    assert HubMount.objects.filter(repo="THUDM/chatglm3-6b").count() == 2
