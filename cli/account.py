"""`gpucloud login`, `gpucloud me`, `gpucloud tokens`."""

from .client import Api, CliError, output, save_config


def login(api: Api, args):
    if not args.token:
        raise CliError("pass --token gpc_… (create one on the console's API tokens page)")
    me = api.get("me")
    path = save_config({"url": api.url, "token": args.token})
    print(f"Logged in to {api.url} as {me['email']} (saved in {path})")


def me(api: Api, args):
    output(args, api.get("me"))


def tokens_ls(api: Api, args):
    columns = [("ID", "id"), ("NAME", "name"), ("PREFIX", "prefix"), ("SCOPE", "scope"), ("ACTIVE", "active")]
    output(args, api.list("tokens"), columns)


def register(commands):
    p = commands.add_parser("login", help="check a token and save it with the console URL")
    p.set_defaults(handler=login)
    p = commands.add_parser("me", help="show the account the token belongs to")
    p.set_defaults(handler=me)
    tokens = commands.add_parser("tokens", help="API tokens").add_subparsers(dest="tokens_command")
    p = tokens.add_parser("ls", help="list your API tokens")
    p.set_defaults(handler=tokens_ls)
