"""`manage.py sync_staff_roles`: give the "ops" and "finance" groups every permission their role lists.

The migration that creates the groups grants what exists at that point; run this after adding models (e.g. the
community images) so the roles also cover them. It only adds: permissions granted by hand are kept.
"""

from django.core.management.base import BaseCommand

from accounts.ops.roles import GROUP_PERMISSIONS, sync_groups


class Command(BaseCommand):
    help = "Create the ops and finance groups and grant the permissions of their roles."

    def handle(self, *args, **options):
        for name, granted in sync_groups().items():
            self.stdout.write(f"{name}: {granted} of {len(GROUP_PERMISSIONS[name])} permissions")
