import uuid

import django.db.models.deletion
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.db import migrations, models


def give_each_team_an_account(apps, schema_editor):
    """Existing teams get their account row: the user that owns the team's resources and holds its wallet."""
    Team = apps.get_model("teams", "Team")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    for team in Team.objects.filter(account__isnull=True):
        team.account = User.objects.create(
            email=f"team-{uuid.uuid4().hex}@teams.invalid", password=make_password(None), is_active=True
        )
        team.save(update_fields=["account"])


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="team",
            name="account",
            field=models.OneToOneField(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="team_account",
                to=settings.AUTH_USER_MODEL,
                verbose_name="account",
            ),
        ),
        migrations.RunPython(give_each_team_an_account, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="team",
            name="account",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="team_account",
                to=settings.AUTH_USER_MODEL,
                verbose_name="account",
            ),
        ),
        migrations.AlterField(
            model_name="teamevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("created", "created the team"),
                    ("invited", "invited"),
                    ("invitation_revoked", "withdrew the invitation of"),
                    ("joined", "joined"),
                    ("role_changed", "changed the role of"),
                    ("removed", "removed"),
                    ("left", "left the team"),
                    ("launched", "launched the instance"),
                    ("started", "started the instance"),
                    ("stopped", "stopped the instance"),
                    ("released", "released the instance"),
                    ("topup_started", "started a top-up of"),
                ],
                max_length=32,
            ),
        ),
    ]
