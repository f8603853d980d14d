"""`gpucloud endpoints deploy|ls|stop|start|rm` and `gpucloud endpoints keys create|rm` (inference endpoints)."""

from .client import Api, output

COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("MODEL", "model"),
    ("STATUS", "status"),
    ("CHIP", "chip"),
    ("¥/H", "price_per_hour"),
    ("BASE URL", "base_url"),
]


def deploy(api: Api, args):
    body = {"template": args.template, "chip": args.chip or "", "name": args.name or ""}
    if args.idle_minutes is not None:
        body["idle_stop_minutes"] = args.idle_minutes
    output(args, api.post("endpoints", body))  # includes the first key, shown once


def ls(api: Api, args):
    output(args, api.list("endpoints"), COLUMNS)


def _action(verb):
    def run(api: Api, args):
        output(args, api.post(f"endpoints/{args.id}/{verb}"))

    return run


def rm(api: Api, args):
    output(args, api.delete(f"endpoints/{args.id}"))


def create_key(api: Api, args):
    data = api.post(f"endpoints/{args.id}/keys", {"name": args.name or ""})
    output(args, data)


def revoke_key(api: Api, args):
    output(args, api.delete(f"endpoints/{args.id}/keys/{args.key_id}"))


def register(commands):
    endpoints = commands.add_parser("endpoints", help="inference endpoints (OpenAI-compatible APIs)")
    sub = endpoints.add_subparsers(dest="endpoints_command")
    p = sub.add_parser("deploy", help="deploy an inference template as an endpoint")
    p.add_argument("template", help="a template slug (see /marketplace/inference/)")
    p.add_argument("--chip", help="a chip slug; default: the cheapest compatible chip with free cards")
    p.add_argument("--name")
    p.add_argument("--idle-minutes", type=int, help="scale to zero after this many idle minutes")
    p.set_defaults(handler=deploy)
    p = sub.add_parser("ls", help="list your endpoints")
    p.set_defaults(handler=ls)
    for name, handler, help_text in (
        ("stop", _action("stop"), "stop an endpoint (billing stops)"),
        ("start", _action("start"), "start a stopped endpoint"),
        ("rm", rm, "release an endpoint (its keys stop working)"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("id")
        p.set_defaults(handler=handler)
    keys = sub.add_parser("keys", help="an endpoint's API keys").add_subparsers(dest="keys_command")
    p = keys.add_parser("create", help="create a key (shown once)")
    p.add_argument("id", metavar="ENDPOINT")
    p.add_argument("--name")
    p.set_defaults(handler=create_key)
    p = keys.add_parser("rm", help="revoke a key")
    p.add_argument("id", metavar="ENDPOINT")
    p.add_argument("key_id", metavar="KEY")
    p.set_defaults(handler=revoke_key)
