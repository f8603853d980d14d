"""`gpucloud instances create [--wait] [--backend auto]|waiting|leave-queue|ls|show|stop|start|rm|logs`, and the
top-level aliases `gpucloud ls|stop|start|rm|logs` (``logs --follow`` polls every 2 s while the instance is live)."""

import sys
import time

from .client import Api, CliError, output

COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("STATUS", "status"),
    ("CHIP", "chip"),
    ("CARDS", "cards"),
    ("ZONE", "zone"),
    ("PLAN", "plan"),
    ("¥/H", "price_per_hour"),
]


def create(api: Api, args):
    if not (args.chip or args.backend or args.no_card):
        raise CliError("give --backend npu|mlu|dcu|cuda, --chip SLUG or --no-card")
    body = {"name": args.name, "image": args.image, "cards": args.cards, "plan": args.plan, "spot": args.spot}
    body |= {key: value for key in ("chip", "backend", "zone") if (value := getattr(args, key))}
    if args.no_card:
        body |= {"no_card": True, "cards": 0}
    if args.data_disk:
        body["data_disk_gb"] = args.data_disk
    if args.mount:
        body["mounts"] = args.mount
    body |= _boot_options(args)
    if args.wait:
        body["wait_for_card"] = True
    created = api.post("instances", body)
    output(args, created)
    for warning in created.get("warnings", []):  # e.g. an imported image built for another chip family
        print(f"warning: {warning}", file=sys.stderr)


WAITING_COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("STATE", "state"),
    ("PLACE", "queue_position"),
    ("EXPECTED BY", "queue_expected_by"),
    ("CHIP", "chip"),
    ("FAMILY", "family"),
    ("CARDS", "cards"),
    ("INSTANCE", "instance"),
]


def waiting(api: Api, args):
    output(args, api.get("instances/waiting"), WAITING_COLUMNS)


def leave_queue(api: Api, args):
    output(args, api.delete(f"instances/waiting/{args.id}"))


def _boot_options(args) -> dict:
    body = {}
    if args.start_command:
        body["start_command"] = args.start_command
    if args.env:
        pairs = [item.split("=", 1) for item in args.env]
        if any(len(pair) != 2 for pair in pairs):
            raise CliError("give --env as NAME=value")
        body["env"] = dict(pairs)
    if args.secret:
        body["secrets"] = args.secret
    return body


FOLLOW_SECONDS = 2.0


def logs(api: Api, args, *, sleep=time.sleep):
    """Print the instance's last lines; with --follow, keep printing new ones until it is no longer live."""
    body = api.get(f"instances/{args.id}/logs", tail=args.tail)
    if body["simulated"]:
        print("simulated instance: there is no machine, so there are no logs")
        return
    shown = _print_new([], body["lines"])
    while args.follow and body["live"]:
        sleep(FOLLOW_SECONDS)
        body = api.get(f"instances/{args.id}/logs", tail=args.tail)
        shown = _print_new(shown, body["lines"])


def _print_new(shown: list[str], lines: list[str]) -> list[str]:
    """Print the lines of ``lines`` that follow what ``shown`` (the previous tail) ended with."""
    overlap = next((n for n in range(min(len(shown), len(lines)), 0, -1) if shown[-n:] == lines[:n]), 0)
    for line in lines[overlap:]:
        print(line, flush=True)
    return lines


def ls(api: Api, args):
    output(args, api.list("instances", **({"all": "1"} if args.all else {})), COLUMNS)


def show(api: Api, args):
    data = api.get(f"instances/{args.id}")
    if args.json:
        output(args, data)
        return
    events = data.pop("events", [])
    access = data.pop("access", {}) or {}
    output(args, data)
    for key, value in access.items():
        print(f"access.{key}: {value}" + (" (simulated)" if access.get("simulated") and key != "simulated" else ""))
    print("events:")
    for event in events:
        print(f"  {event['at']}  {event['old'] or '·'} → {event['new']}  {event['reason_display']}")


def _action(verb):
    def run(api: Api, args):
        body = {"no_card": True} if getattr(args, "no_card", False) else {}
        output(args, api.post(f"instances/{args.id}/{verb}", body), COLUMNS)

    return run


def mount(api: Api, args):
    output(args, api.post(f"instances/{args.id}/mounts", {"repo": args.repo}))


def unmount(api: Api, args):
    api.delete(f"instances/{args.id}/mounts/{args.repo}")
    print(f"unmounted {args.repo}")


def mounts(api: Api, args):
    output(args, api.get(f"instances/{args.id}/mounts"), [("TARGET", "target"), ("REPO", "repo"), ("KIND", "kind")])


def _add_mount_commands(commands):
    p = commands.add_parser("mount", help="mount a hub model or dataset read-only (/root/public, /root/datasets)")
    p.add_argument("id")
    p.add_argument("repo", help="org/name")
    p.set_defaults(handler=mount)
    p = commands.add_parser("unmount", help="unmount a hub model or dataset")
    p.add_argument("id")
    p.add_argument("repo", help="org/name")
    p.set_defaults(handler=unmount)
    p = commands.add_parser("mounts", help="list an instance's mounts")
    p.add_argument("id")
    p.set_defaults(handler=mounts)


def _add_commands(commands, *, aliases_only=False):
    existing = set(commands.choices)
    if not aliases_only:
        p = commands.add_parser("create", help="launch an instance")
        p.add_argument("--name", required=True)
        p.add_argument("--image", required=True, help="a base image slug for the chip's family")
        p.add_argument(
            "--backend",
            choices=["npu", "mlu", "dcu", "cuda", "auto"],
            help="the cheapest chip of this family; auto: the chip cheapest per unit of work the image runs on",
        )
        p.add_argument("--chip", help="a chip slug (see /api/v1/chips)")
        p.add_argument("--no-card", action="store_true", help="CPU-only no-card mode")
        p.add_argument("--cards", type=int, default=1)
        p.add_argument("--zone")
        p.add_argument("--plan", default="payg", help="payg, daily or monthly")
        p.add_argument("--spot", action="store_true", help="preemptible, 40%% off")
        p.add_argument("--data-disk", type=int, metavar="GB", help="a new cloud disk of GB, attached")
        p.add_argument("--mount", action="append", metavar="ORG/NAME", help="a hub model or dataset (repeatable)")
        p.add_argument(
            "--start-command", metavar="CMD", help="run with /bin/sh -c at every boot; its output is the logs"
        )
        p.add_argument("--env", action="append", metavar="NAME=VALUE", help="an environment variable (repeatable)")
        p.add_argument(
            "--secret", action="append", metavar="NAME", help="one of your secrets, as a variable (repeatable)"
        )
        p.add_argument(
            "--wait",
            action="store_true",
            help="when no card is free, wait in the queue and start when one frees (instead of failing)",
        )
        p.set_defaults(handler=create)
        p = commands.add_parser("waiting", help="launches waiting for a card: place in the queue, expected start")
        p.set_defaults(handler=waiting)
        p = commands.add_parser("leave-queue", help="cancel a launch waiting for a card")
        p.add_argument("id")
        p.set_defaults(handler=leave_queue)
        p = commands.add_parser("show", help="an instance with its access details and events")
        p.add_argument("id")
        p.set_defaults(handler=show)
    for name, handler, help_text in (
        ("ls", ls, "list your instances"),
        ("stop", _action("stop"), "stop an instance (checkpoint signal, then stop)"),
        ("start", _action("start"), "start a stopped or preempted instance"),
        ("rm", _action("release"), "release an instance (deletes its system disk)"),
    ):
        if name in existing:
            continue  # another app already owns this top-level name
        p = commands.add_parser(name, help=help_text)
        if name == "ls":
            p.add_argument("--all", action="store_true", help="include released instances")
        else:
            p.add_argument("id")
        if name == "start":
            p.add_argument("--no-card", action="store_true", help="start CPU-only when the zone is full")
        p.set_defaults(handler=handler)
    if "logs" not in existing:
        p = commands.add_parser("logs", help="the last lines an instance's start command wrote")
        p.add_argument("id")
        p.add_argument("--tail", type=int, default=200, help="how many lines (1 to 5000)")
        p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines while it is live")
        p.set_defaults(handler=logs)


def register(commands):
    instances = commands.add_parser("instances", help="instances").add_subparsers(dest="instances_command")
    _add_commands(instances)
    _add_mount_commands(instances)
    _add_commands(commands, aliases_only=True)
