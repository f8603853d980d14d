"""Project package: settings, URLs, the Celery app, WSGI/ASGI entry points."""

import os

# What the console's processes write (the database, users' files, invoices, hub blobs, the broker's queue, keys) is
# its own user's alone: folders 0700, files 0600, whatever the shell's umask was. Every process imports this package
# before anything else of the project (manage.py and the test run through config.settings, config.wsgi,
# config.asgi, celery -A config), so this is the one place the mask is set. What the sandboxes must read is given
# its mode explicitly (instances.backends.local, marketplace.hub); manage.py migrate makes older trees private
# (accounts.data_dir).
os.umask(0o077)

from .celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
