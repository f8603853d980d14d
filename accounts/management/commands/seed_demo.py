"""Create the demo account used by `make run` (development only), idempotently."""

from allauth.account.models import EmailAddress
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts import services
from accounts.models import User


class Command(BaseCommand):
    help = "Create (or reset) the demo user with a verified e-mail. Refused in production."

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError("seed_demo is for development only.")
        email, password = settings.DEMO_EMAIL, settings.DEMO_PASSWORD
        user, created = User.objects.get_or_create(email=email)
        user.set_password(password)
        user.save()
        address, _ = EmailAddress.objects.get_or_create(user=user, email=email)
        if not address.verified or not address.primary:
            address.verified = address.primary = True
            address.save()
        # The same hook a real verification runs: the demo user gets the trial credit (once).
        services.on_email_verified(user, email)
        self.stdout.write(f"Demo login: {email} / {password} ({'created' if created else 'reset'})")
