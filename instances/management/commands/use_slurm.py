"""``manage.py use_slurm [zone …] [--off]``: run the catalog's nodes of these zones on the Slurm backend.

Only nodes whose chip has a GRES type in the zone's Slurm settings move (the others stay simulated: an untyped
request would mix chips). Without zone names, every zone in ``settings.SLURM_ZONES``. ``--off`` moves them back
to the simulated backend. Instances keep the backend they were launched on.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from catalog.models import Node, Zone
from instances.backends.slurm import zone_settings


class Command(BaseCommand):
    help = "Point the nodes of the given zones (default: every zone in SLURM_ZONES) at the Slurm backend."

    def add_arguments(self, parser):
        parser.add_argument("zones", nargs="*", help="zone slugs")
        parser.add_argument("--off", action="store_true", help="back to the simulated backend")

    def handle(self, *args, zones, off, **options):
        slugs = zones or list(getattr(settings, "SLURM_ZONES", {}))
        unknown = sorted(set(slugs) - set(Zone.objects.filter(slug__in=slugs).values_list("slug", flat=True)))
        if unknown:
            raise CommandError(f"Unknown zone(s): {', '.join(unknown)}")
        for slug in slugs:
            chips = list(zone_settings(slug).get("gres_types", {}))
            nodes = Node.objects.filter(zone__slug=slug, chip__slug__in=chips)
            moved = nodes.update(backend_name="simulated" if off else "slurm")
            target = "simulated" if off else "slurm"
            self.stdout.write(f"{slug}: {moved} node(s) of {', '.join(chips)} now on the {target} backend")
