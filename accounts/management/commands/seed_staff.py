"""Create the demo back-office staff used by `make run` (development only), idempotently: one member of the
"ops" group and one of "finance", with verified e-mail addresses and the demo password."""

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError

from accounts.models import User
from accounts.ops import roles

STAFF = [("ops@gpucloud.local", roles.OPS), ("finance@gpucloud.local", roles.FINANCE)]


class Command(BaseCommand):
    help = "Create (or reset) the demo ops and finance staff, and the staff roles. Refused in production."

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError("seed_staff is for development only.")
        roles.sync_groups()
        for email, group in STAFF:
            user, _created = User.objects.get_or_create(email=email, defaults={"is_staff": True})
            user.is_staff = True
            user.set_password(settings.DEMO_PASSWORD)
            user.save()
            user.groups.add(Group.objects.get(name=group))
            EmailAddress.objects.update_or_create(user=user, email=email, defaults={"verified": True, "primary": True})
            self.stdout.write(f"Back office ({group}): {email} / {settings.DEMO_PASSWORD} at /ops/")
