"""Record each publisher's hub bytes in their storage (what ``marketplace.hub.repos.record_usage`` keeps up to date
from now on): every distinct file in any commit of their repositories, and files they uploaded that no commit
names yet."""

from django.db import migrations
from django.db.models import Sum


def record(apps, schema_editor):
    HubItem = apps.get_model("marketplace", "HubItem")
    HubBlob = apps.get_model("marketplace", "HubBlob")
    HubBlobUpload = apps.get_model("marketplace", "HubBlobUpload")
    HubTreeFile = apps.get_model("marketplace", "HubTreeFile")
    StoredElsewhere = apps.get_model("storage", "StoredElsewhere")
    owners = set(HubItem.objects.filter(commits__isnull=False, owner__isnull=False).values_list("owner_id", flat=True))
    owners |= set(HubBlobUpload.objects.values_list("user_id", flat=True))
    named = HubTreeFile.objects.values("blob_id")
    for owner in sorted(owners):
        committed = HubTreeFile.objects.filter(commit__item__owner_id=owner).values("blob_id")
        pending = HubBlobUpload.objects.filter(user_id=owner).exclude(blob__in=named).values("blob_id")
        total = HubBlob.objects.filter(pk__in=committed).aggregate(t=Sum("size"))["t"] or 0
        total += HubBlob.objects.filter(pk__in=pending).exclude(pk__in=committed).aggregate(t=Sum("size"))["t"] or 0
        StoredElsewhere.objects.update_or_create(owner_id=owner, source="hub", defaults={"size": total})


class Migration(migrations.Migration):
    dependencies = [
        ("marketplace", "0008_hub_namespace_any_case"),
        ("storage", "0006_stored_elsewhere"),
    ]

    operations = [migrations.RunPython(record, migrations.RunPython.noop)]
