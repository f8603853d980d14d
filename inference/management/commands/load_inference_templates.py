"""Seed the inference templates from inference/catalog.toml, idempotently."""

from django.core.management.base import BaseCommand

from inference import template_catalog as services


class Command(BaseCommand):
    help = (
        "Load the seed inference templates (run after load_hub and load_images). Templates that exist are kept as "
        "staff edited them unless --update."
    )

    def add_arguments(self, parser):
        parser.add_argument("--update", action="store_true", help="Rewrite existing templates from the file.")

    def handle(self, *args, update=False, **options):
        counts = services.load(update=update)
        summary = ", ".join(f"{n} {what}" for what, n in counts.items())
        self.stdout.write(f"Inference templates loaded: {summary}.")
