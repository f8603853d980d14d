"""Seed the catalog and the price list from the files in the repository, idempotently."""

from django.core.management.base import BaseCommand

from billing import seed as pricing_catalog
from catalog import seed as catalog


class Command(BaseCommand):
    help = (
        "Load regions, zones, chips, nodes and specs (catalog/seed/catalog.toml), then prices, plans and "
        "subsidy programmes (billing/seed/pricing.toml). Existing rows are kept as staff edited them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--update", action="store_true", help="Refresh chip figures from the file.")

    def handle(self, *args, update=False, **options):
        counts = catalog.load(update=update) | pricing_catalog.load()
        created = ", ".join(f"{n} {what}" for what, n in counts.items())
        self.stdout.write(f"Catalog loaded; created {created}.")
