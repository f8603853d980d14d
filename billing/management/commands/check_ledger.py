"""`manage.py check_ledger`: every cached balance equals the sum of its entries, every transaction balances."""

from django.core.management.base import BaseCommand, CommandError

from billing import ledger, spend


class Command(BaseCommand):
    help = (
        "Verify the ledger: cached balances = sums of entries, transactions sum to zero, subsidy caches and spend "
        "sums agree. --rebuild-spend recomputes the spend sums from the ledger first (after a TIME_ZONE change)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rebuild-spend", action="store_true", help="Recompute the spend sums from the ledger.")

    def handle(self, *args, **options):
        if options["rebuild_spend"]:
            read = spend.rebuild()
            self.stdout.write(f"Spend sums rebuilt from {read:,} spend transactions.")
        problems = ledger.check()
        for problem in problems:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"{len(problems)} ledger problem(s) found.")
        self.stdout.write(self.style.SUCCESS("Ledger OK."))
