"""`manage.py check_ledger`: every cached balance equals the sum of its entries, every transaction balances."""

from django.core.management.base import BaseCommand, CommandError

from billing import ledger


class Command(BaseCommand):
    help = "Verify the ledger: cached balances = sums of entries, transactions sum to zero, subsidy caches agree."

    def handle(self, *args, **options):
        problems = ledger.check()
        for problem in problems:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"{len(problems)} ledger problem(s) found.")
        self.stdout.write(self.style.SUCCESS("Ledger OK."))
