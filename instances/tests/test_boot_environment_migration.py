"""The boot options' migration: a populated database of the previous schema migrates forward with every instance
and event kept (the new fields empty: the image's default, no variables, no secrets), and back again."""

import pytest

from instances.models import Instance, InstanceEvent
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("instances", "0008_inference_app")]


def test_instances_and_their_events_survive_the_migration_both_ways(migrator, launch):
    instance = launch(name="kept")
    settle()
    events = InstanceEvent.objects.filter(instance=instance).count()

    old = migrator.to(BEFORE)
    before = old.get_model("instances", "Instance").objects.get(public_id=instance.public_id)
    assert before.name == "kept" and not hasattr(before, "start_command")
    old.get_model("instances", "Instance").objects.create(
        owner_id=instance.owner_id,
        name="made-before",
        zone_id=instance.zone_id,
        spec_id=instance.spec_id,
        plan_id=instance.plan_id,
        image=instance.image,
    )

    migrator.to_latest()

    kept = Instance.objects.get(public_id=instance.public_id)
    made = Instance.objects.get(name="made-before")
    assert (kept.status, InstanceEvent.objects.filter(instance=kept).count()) == ("running", events)
    for row in (kept, made):
        assert (row.start_command, row.env, row.secret_names) == ("", {}, [])
