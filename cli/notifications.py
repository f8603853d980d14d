"""`gpucloud notifications channels ls|add|rm|test`: where the account's notifications are delivered.

A channel is named by its id or its name. A secret is read from stdin (or --secret) and never shown again.
"""

from .client import Api, CliError, output
from .secrets import read_value

KINDS = ("webhook", "wecom", "dingtalk", "feishu", "email")


def _find(api: Api, ref: str) -> dict:
    channels = api.list("notifications/channels")
    found = [c for c in channels if ref in (c["id"], c["name"])]
    if len(found) != 1:
        raise CliError(f"no channel named {ref}" if not found else f"several channels are named {ref}: use the id")
    return found[0]


def channels_ls(api: Api, args):
    columns = [("ID", "id"), ("NAME", "name"), ("KIND", "kind"), ("URL", "url"), ("E-MAIL", "email"), ("ON", "enabled")]
    output(args, api.list("notifications/channels"), columns)


def channels_add(api: Api, args):
    body = {"kind": args.kind, "name": args.name, "events": args.event or []}
    if args.kind == "email":
        body["email"] = args.target
    else:
        body["url"] = args.target
    if args.with_secret or args.secret is not None:
        body["secret"] = read_value(_SecretArgs(args.secret, "the channel's secret"))
    channel = api.post("notifications/channels", body)
    if args.json:
        output(args, channel)
        return
    print(f"added {channel['name']} ({channel['id']})")


class _SecretArgs:
    """What ``secrets.read_value`` reads: a value given on the command line, or a prompt's name."""

    def __init__(self, value, name):
        self.value, self.name = value, name


def channels_rm(api: Api, args):
    channel = _find(api, args.channel)
    api.delete(f"notifications/channels/{channel['id']}")
    print(f"deleted {channel['name']}")


def channels_test(api: Api, args):
    channel = _find(api, args.channel)
    delivery = api.post(f"notifications/channels/{channel['id']}/test")
    if args.json:
        output(args, delivery)
    elif delivery["status"] == "sent":
        print(f"test sent to {channel['name']}: {delivery['response_code'] or 'OK'}")
    else:
        raise CliError(f"the test failed: {delivery['error']}")


def register(commands):
    notifications = commands.add_parser("notifications", help="where your notifications are delivered")
    sub = notifications.add_subparsers(dest="notifications_command")
    channels = sub.add_parser("channels", help="webhooks, robots and e-mail addresses that get your notifications")
    csub = channels.add_subparsers(dest="channels_command")
    p = csub.add_parser("ls", aliases=["list"], help="list the channels")
    p.set_defaults(handler=channels_ls)
    p = csub.add_parser("add", help="add a channel")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("name")
    p.add_argument("target", help="the URL (an e-mail address for kind email)")
    p.add_argument("--event", action="append", help="send only this event (repeat); default: every event")
    p.add_argument("--with-secret", action="store_true", help="read the signing secret from stdin")
    p.add_argument("--secret", help="the signing secret on the command line (prefer --with-secret)")
    p.set_defaults(handler=channels_add)
    p = csub.add_parser("rm", help="delete a channel")
    p.add_argument("channel", help="its id or name")
    p.set_defaults(handler=channels_rm)
    p = csub.add_parser("test", help="send a test event now and show the receiver's answer")
    p.add_argument("channel", help="its id or name")
    p.set_defaults(handler=channels_test)
