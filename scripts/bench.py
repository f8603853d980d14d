"""`make bench`: run every benchmark on SQLite and, when reachable, on PostgreSQL + Redis; write the tables.

Each database is created fresh (SQLite under var/bench/, PostgreSQL database gpucloud_bench), migrated and
loaded with the catalog. Results go into docs/benchmarks.md (the docs site's Benchmarks page) between the bench markers.
Options: --quick (skip the long benchmarks), --only TEXT, --skip TEXT, --no-postgres, --no-sqlite, --light (CI:
every benchmark on small data; the table is printed, nothing is written).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "var" / "bench"
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpucloud_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def unmount_under(folder: Path) -> None:
    """Unmount what an earlier run left mounted under ``folder`` (storage images of its data directory), so that
    the folder can be removed."""
    prefix = f"{folder.resolve()}/"
    mounts = Path("/proc/self/mounts").read_text().splitlines() if Path("/proc/self/mounts").exists() else []
    points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False)


def manage(env, *args):
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


# The same catalogue `make run` loads, so benchmarks see the product's real data.
LOADERS = ("load_catalog", "load_hub", "load_images", "load_inference_templates")


def prepare(env):
    Path(env["DATA_DIR"]).mkdir(parents=True, exist_ok=True)
    manage(env, "migrate", "--noinput", "-v", "0")
    for name in LOADERS:
        manage(env, name)


def postgres_available() -> bool:
    try:
        import psycopg

        base = PG_URL.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(base, autocommit=True, connect_timeout=3) as conn:
            name = PG_URL.rsplit("/", 1)[1]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return True
    except Exception as exc:  # any failure means: no PostgreSQL for this run
        print(f"PostgreSQL not used: {exc}", file=sys.stderr)
        return False


def redis_available() -> bool:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).flushdb()
        return True
    except Exception:
        return False


def table(results: dict) -> str:
    lines = [
        f"Measured on {results['machine']}, {datetime.now(UTC):%Y-%m-%d}, with `make bench`.",
        "",
        "| benchmark | metric | SQLite (embedded) | PostgreSQL + Redis |",
        "|---|---|---:|---:|",
    ]
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for row in results["rows"]:
        whole = not row["unit"] and float(row["value"]).is_integer()  # a count, not a measurement
        value = f"{row['value']:,.0f}" if whole else f"{row['value']:,.1f}"
        text = f"{value} {row['unit']}".strip() + (f" ({row['note']})" if row["note"] else "")
        cells.setdefault((row["benchmark"], row["metric"]), {})[row["database"]] = text
    for (bench, metric), by_db in cells.items():
        lines.append(f"| {bench} | {metric} | {by_db.get('SQLite', '—')} | {by_db.get('PostgreSQL', '—')} |")
    return "\n".join(lines) + "\n"


def merge_with_previous(results: dict) -> dict:
    """Keep the rows of benchmarks this run did not execute (e.g. with --only), replace the ones it did."""
    store = ROOT / "docs" / "benchmarks.json"
    store.parent.mkdir(exist_ok=True)
    previous = json.loads(store.read_text()) if store.exists() else {"rows": []}
    ran = {(row["benchmark"], row["database"]) for row in results["rows"]}
    kept = [row for row in previous["rows"] if (row["benchmark"], row["database"]) not in ran]
    merged = {"machine": results["machine"], "rows": kept + results["rows"]}
    store.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n")
    return merged


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only")
    parser.add_argument("--skip", help="leave out the benchmarks whose title contains this text")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--light", action="store_true")
    args = parser.parse_args()
    if args.no_postgres and args.no_sqlite:
        sys.exit("--no-postgres and --no-sqlite together leave nothing to run")
    extra = ["--quick"] if args.quick else []
    extra += (["--only", args.only] if args.only else []) + (["--skip", args.skip] if args.skip else [])
    extra += ["--light"] if args.light else []

    # Each database's pass has a folder of its own, so that CI can run the two passes at different times.
    out = OUT / ("pg" if args.no_sqlite else "sqlite" if args.no_postgres else "")
    unmount_under(out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    results_path = out / "results.json"
    base_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"}}

    if not args.no_sqlite:
        sqlite_env = base_env | {"DATA_DIR": str(OUT / "sqlite")}
        prepare(sqlite_env)
        manage(sqlite_env, "bench", "--json", str(results_path), *extra)

    in_ci = os.environ.get("CI") == "true"  # CI's services are there: a missing one is a failure, not a skip
    if not args.no_postgres and not postgres_available() and in_ci:
        sys.exit("CI=true and PostgreSQL does not answer: the PostgreSQL + Redis column cannot be left empty")
    if not args.no_postgres and postgres_available():
        pg_env = base_env | {"DATA_DIR": str(OUT / "pg"), "DATABASE_URL": PG_URL}
        if not args.light:
            pg_env.setdefault("BENCH_METERING_SESSIONS", "100000")  # the tick's target: 100,000 sessions < 10 s
        if redis_available():
            pg_env |= {"CELERY_BROKER_URL": REDIS_URL}
        elif in_ci:
            sys.exit(f"CI=true and Redis does not answer at {REDIS_URL}")
        prepare(pg_env)
        manage(pg_env, "bench", "--json", str(results_path), *extra)

    results = json.loads(results_path.read_text()) if results_path.exists() else {"machine": "?", "rows": []}
    if args.light:
        print(table(results))  # small data: proof that every benchmark runs, not numbers to publish
        return
    results = merge_with_previous(results)
    markdown = table(results)
    page = ROOT / "docs" / "benchmarks.md"
    text = page.read_text()
    if START in text and END in text:
        head, rest = text.split(START, 1)
        page.write_text(head + START + "\n" + markdown + END + rest.split(END, 1)[1])
    else:
        page.write_text("# Benchmarks\n\n" + START + "\n" + markdown + END + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
