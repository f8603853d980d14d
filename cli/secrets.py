"""`gpucloud secrets list|set NAME|rm NAME`: the account's secrets, which instances get as environment variables.

A value goes in from stdin (or --value) and never comes back: the console shows names only.
"""

import getpass
import sys

from .client import Api, CliError, output


def secrets_list(api: Api, args):
    output(args, api.list("secrets"), [("NAME", "name"), ("UPDATED", "updated_at"), ("CREATED", "created_at")])


def read_value(args, stdin=None) -> str:
    """--value, else stdin: typed without echo at a terminal, else read whole (one final line end dropped, as
    ``echo`` and most files add one)."""
    if args.value is not None:
        return args.value
    stdin = stdin or sys.stdin
    if stdin.isatty():
        return getpass.getpass(f"Value of {args.name} (not shown): ")
    value = stdin.read()
    return value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")


def secrets_set(api: Api, args):
    value = read_value(args)
    if not value:
        raise CliError("the value is empty: pipe it in, type it, or pass --value")
    secret = api.request("PUT", f"secrets/{args.name}", json={"value": value})
    if args.json:
        output(args, secret)
        return
    print(f"saved {secret['name']} (instances get it at their next boot)")


def secrets_rm(api: Api, args):
    api.delete(f"secrets/{args.name}")
    print(f"deleted {args.name}")


def register(commands):
    secrets = commands.add_parser("secrets", help="secrets given to instances as environment variables")
    sub = secrets.add_subparsers(dest="secrets_command")
    p = sub.add_parser("list", aliases=["ls"], help="list your secrets (names only: values are never shown)")
    p.set_defaults(handler=secrets_list)
    p = sub.add_parser("set", help="create a secret or replace its value (read from stdin)")
    p.add_argument("name", help="the environment variable it becomes, e.g. HF_TOKEN")
    p.add_argument("--value", help="the value on the command line (shells keep it in their history: prefer stdin)")
    p.set_defaults(handler=secrets_set)
    p = sub.add_parser("rm", help="delete a secret (instances that use it boot without it)")
    p.add_argument("name")
    p.set_defaults(handler=secrets_rm)
