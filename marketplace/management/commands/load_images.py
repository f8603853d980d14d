"""Seed the image marketplace's official catalogue from marketplace/images/catalog.toml, idempotently."""

from django.core.management.base import BaseCommand

from marketplace.images import catalog


class Command(BaseCommand):
    help = (
        "Load the official images and case-study images (marketplace/images/catalog.toml). Images that exist are "
        "kept as staff edited them unless --update; launch counts and ratings are never reset."
    )

    def add_arguments(self, parser):
        parser.add_argument("--update", action="store_true", help="Rewrite existing official images from the file.")

    def handle(self, *args, update=False, **options):
        counts = catalog.load(update=update)
        self.stdout.write(f"Images loaded: {counts['created']} created, {counts['existing']} already there.")
