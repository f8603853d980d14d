"""Seed the model & dataset hub from marketplace/seed/, idempotently."""

from django.core.management.base import BaseCommand

from marketplace import seed as catalog
from marketplace.hub import search


class Command(BaseCommand):
    help = (
        "Load the hub's starter models and datasets (marketplace/seed/hub.toml and hub_cards.toml). Items that "
        "exist are kept as staff edited them unless --update; mounts and likes are never reset."
    )

    def add_arguments(self, parser):
        parser.add_argument("--update", action="store_true", help="Rewrite existing catalogue items from the files.")
        parser.add_argument("--reindex", action="store_true", help="Rebuild the SQLite search index of all items.")

    def handle(self, *args, update=False, reindex=False, **options):
        counts = catalog.load(update=update)
        if reindex:
            search.sync()
        summary = ", ".join(f"{n} {what}" for what, n in counts.items())
        self.stdout.write(f"Hub loaded: {summary}.")
