"""The staff roles: groups "ops" and "finance" with the permissions of accounts/ops/roles.py."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from accounts.ops.roles import GROUP_PERMISSIONS


def create_roles(apps, schema_editor):
    # Permissions are normally created after migrate; create them now so the groups can hold them.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, wanted in GROUP_PERMISSIONS.items():
        group, _created = Group.objects.get_or_create(name=name)
        for app_label, codename in wanted:
            # A model added later (e.g. community images) gets its permission from `manage.py sync_staff_roles`.
            permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if permission is not None:
                group.permissions.add(permission)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(GROUP_PERMISSIONS)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0002_enterprise_verification_audit_log"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("billing", "0002_ledger_wallets_metering_topups"),
        ("instances", "0002_instance_lifecycle"),
        ("marketplace", "0001_initial"),
        ("storage", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
