"""Make the floor's database (``FLOOR_DATABASE``) and print the session cookie of a user logged in to it.

Run as ``python -m bench.floor.prepare`` by ``bench.saturation``, in its own process: the floor's
settings are not the console's.
"""

import os
import sys

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.floor.settings"


def main() -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import login
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command
    from django.http import HttpRequest

    call_command("migrate", verbosity=0, interactive=False)
    user, _ = User.objects.get_or_create(username="floor")
    request = HttpRequest()
    request.session = SessionStore()
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session.save()
    sys.stdout.write(f"{settings.SESSION_COOKIE_NAME}={request.session.session_key}\n")


if __name__ == "__main__":
    main()
