"""Create synthetic hub items in bulk for scale tests and benchmarks."""

import time

from django.core.management.base import BaseCommand, CommandError

from marketplace.hub import synthetic

MAX_COUNT = 2_000_000


class Command(BaseCommand):
    help = "Create COUNT synthetic public hub items (labelled “synthetic”) for benchmarks. Not for production."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=100_000)
        parser.add_argument("--seed", type=int, default=7, help="Random seed: the same seed gives the same items.")

    def handle(self, *args, count, seed, **options):
        if not 1 <= count <= MAX_COUNT:
            raise CommandError(f"--count must be between 1 and {MAX_COUNT:,}.")
        started = time.perf_counter()
        created = synthetic.generate(count, seed=seed)
        self.stdout.write(f"Created {created:,} synthetic hub items in {time.perf_counter() - started:.1f} s.")
