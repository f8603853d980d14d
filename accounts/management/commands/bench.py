"""Run the registered benchmarks against the current database and print/write a Markdown table."""

import json
import os
import platform
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

import bench as harness
from bench import REGISTRY, Report


class Command(BaseCommand):
    help = "Run every benchmark of bench (use a throw-away database: `make bench` sets one up)."

    def add_arguments(self, parser):
        parser.add_argument("--only", help="run benchmarks whose title contains this text")
        parser.add_argument("--skip", help="leave out benchmarks whose title contains this text")
        parser.add_argument("--quick", action="store_true", help="skip the long benchmarks")
        parser.add_argument("--light", action="store_true", help="every benchmark on small data (CI)")
        parser.add_argument("--json", dest="json_path", help="append the results to this JSON file")

    def handle(self, *args, only=None, skip=None, quick=False, light=False, json_path=None, **options):
        harness.LIGHT = light
        # Importing the modules registers their benchmarks, in this order (the order of the docs' benchmark table),
        # once the size is set.
        # isort: off
        from bench import pages, saturation, instances, jobs, marketplace, images, billing, storage, hub, inference  # noqa: F401

        # isort: on
        database = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
        broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
        rows = []
        for bench in REGISTRY:
            title = bench.title.lower()
            if (only and only.lower() not in title) or (skip and skip.lower() in title) or (quick and not bench.quick):
                continue
            self.stderr.write(f"· {bench.title} ({database}) …")
            report = Report(bench.title)
            began = time.monotonic()
            bench.func(report)
            self.stderr.write(f"  ({time.monotonic() - began:.0f} s)")
            for row in report.rows:
                rows.append(row.__dict__ | {"database": database, "broker": broker})
                self.stdout.write(f"  {row.metric}: {row.value:.1f} {row.unit} {row.note}")
        if json_path:
            path = Path(json_path)
            existing = json.loads(path.read_text()) if path.exists() else {"machine": machine(), "rows": []}
            existing["rows"].extend(rows)
            path.write_text(json.dumps(existing, indent=1, ensure_ascii=False))


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"
