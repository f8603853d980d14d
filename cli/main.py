"""Entry point of the `gpucloud` command."""

import argparse
import sys

from . import account, billing, inference, instances, jobs, marketplace, notifications, secrets, ssh, storage, teams
from .client import Api, CliError

# Each module adds its subcommands; the CLI is a plain HTTP client of the API and imports nothing of the apps.
COMMAND_MODULES = [
    account,
    secrets,
    ssh,
    instances,
    jobs,
    inference,
    marketplace,
    storage,
    billing,
    teams,
    notifications,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpucloud", description="Xinchuang GPU Cloud from the command line.")
    parser.add_argument("--url", help="console URL (default: saved by login, or $GPUCLOUD_URL)")
    parser.add_argument("--token", help="API token (default: saved by login, or $GPUCLOUD_TOKEN)")
    parser.add_argument("--team", help="act in this team, with its token saved by `gpucloud teams token SLUG`")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--lang", help="language of messages, e.g. en or zh-hans")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        args.handler(Api.from_args(args), args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
