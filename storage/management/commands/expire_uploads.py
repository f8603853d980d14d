from django.core.management.base import BaseCommand

from storage import services


class Command(BaseCommand):
    help = "Delete resumable uploads idle past STORAGE_UPLOAD_EXPIRY_HOURS, with their staged bytes."

    def handle(self, *args, **options):
        removed = services.expire_stale_uploads()
        self.stdout.write(f"{removed} expired upload(s) removed.")
