"""`gpucloud jobs submit|ls|show|logs|cancel|rerun`: a command run to its end on a machine of a family (or the
cheapest per unit of work with ``--backend auto``), its machine released when the command ends or the timeout
hits. ``logs -f`` polls every 2 s until the job ends. ``submit --cron "0 2 * * *" [--tz ZONE]`` saves a schedule
instead, each run a job of its own; ``jobs schedules ls|runs|suspend|resume|rm`` manage them."""

import argparse
import re
import shlex
import sys
import time

from .client import Api, CliError, output
from .instances import FOLLOW_SECONDS, _print_new

COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("STATE", "state"),
    ("QUEUE", "queue_position"),
    ("FAMILY", "family"),
    ("CHIP", "chip"),
    ("CARDS", "cards"),
    ("EXIT", "exit_code"),
    ("¥/H", "price_per_hour"),
]
STATES = ["queued", "starting", "running", "succeeded", "failed", "timed_out", "cancelled"]
DURATION = re.compile(r"^(\d+)([smhd]?)$")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int:
    """``90``, ``90s``, ``30m``, ``1h``, ``2d`` as seconds."""
    found = DURATION.match(text.strip().lower())
    if not found:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: give e.g. 90s, 30m, 1h or 2d")
    return int(found.group(1)) * UNIT_SECONDS[found.group(2)]


def submit(api: Api, args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise CliError("give the command after --, e.g. `gpucloud jobs submit … -- python train.py`")
    body = {
        "name": args.name or command[0][:64],
        "image": args.image,
        "command": command[0] if len(command) == 1 else shlex.join(command),
        "backend": args.backend,
        "cards": args.cards,
        "timeout_seconds": args.timeout,
        "spot": args.spot,
        "retries": args.retries,
    }
    if args.max_price is not None:
        body["max_price_per_hour"] = args.max_price
    if args.cron:
        _schedule(api, args, body)
        return
    if args.env:
        pairs = [item.split("=", 1) for item in args.env]
        if any(len(pair) != 2 for pair in pairs):
            raise CliError("give --env as NAME=value")
        body["env"] = dict(pairs)
    job = api.post("jobs", body)
    for warning in job.get("warnings", []):  # e.g. an imported image built for another chip family
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        output(args, job)
        return
    print(f"{job['id']}  {job['state']}" + (f" (place {job['queue_position']})" if job["queue_position"] else ""))
    print(job["choice_reason"])


SCHEDULE_COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("CRON", "cron"),
    ("ZONE", "timezone"),
    ("SUSPENDED", "suspended"),
    ("NEXT RUN", "next_run_at"),
]
RUN_COLUMNS = [("DUE", "due_at"), ("OUTCOME", "outcome"), ("JOB", "job"), ("DETAIL", "detail")]


def _schedule(api: Api, args, body: dict) -> None:
    body |= {"cron": args.cron, "allow_overlap": args.allow_overlap}
    if args.tz:
        body["timezone"] = args.tz
    made = api.post("jobs/schedules", body)
    if args.json:
        output(args, made)
        return
    print(f"{made['id']}  {made['cron']} ({made['timezone']}), next run {made['next_run_at']}")


def schedules_ls(api: Api, args):
    output(args, api.list("jobs/schedules"), SCHEDULE_COLUMNS)


def schedules_runs(api: Api, args):
    output(args, api.get(f"jobs/schedules/{args.id}/runs"), RUN_COLUMNS)


def schedules_rm(api: Api, args):
    api.delete(f"jobs/schedules/{args.id}")
    print(f"{args.id}  deleted (the jobs it ran stay)")


def _schedule_action(verb):
    def run(api: Api, args):
        output(args, [api.post(f"jobs/schedules/{args.id}/{verb}", {})], SCHEDULE_COLUMNS)

    return run


def ls(api: Api, args):
    output(args, api.list("jobs", **({"state": args.state} if args.state else {})), COLUMNS)


def show(api: Api, args):
    output(args, api.get(f"jobs/{args.id}"))


def logs(api: Api, args, *, sleep=time.sleep):
    """Print the job's last lines; with --follow, keep printing new ones until the job has ended."""
    body = api.get(f"jobs/{args.id}/logs", tail=args.tail)
    if body["simulated"]:
        print("simulated machine: there is no machine, so there are no logs")
        return
    shown = _print_new([], body["lines"])
    while args.follow and body["live"]:
        sleep(FOLLOW_SECONDS)
        body = api.get(f"jobs/{args.id}/logs", tail=args.tail)
        shown = _print_new(shown, body["lines"])


def _action(verb):
    def run(api: Api, args):
        output(args, [api.post(f"jobs/{args.id}/{verb}", {})], COLUMNS)

    return run


def register(commands):
    jobs = commands.add_parser("jobs", help="jobs: a command run to its end").add_subparsers(dest="jobs_command")
    p = jobs.add_parser("submit", help="submit a job: gpucloud jobs submit --image … --timeout 1h -- python train.py")
    p.add_argument("--name", help="default: the command's first word")
    p.add_argument("--image", required=True, help="an image variant slug (any variant of a multi-arch image)")
    p.add_argument("--backend", default="auto", choices=["auto", "npu", "mlu", "dcu", "cuda", "cpu"])
    p.add_argument("--cards", type=int, default=1)
    p.add_argument("--timeout", type=duration, required=True, help="e.g. 90s, 30m, 1h")
    p.add_argument("--max-price", metavar="CNY", help="the most it may cost per hour")
    p.add_argument("--spot", action="store_true", help="preemptible, cheaper")
    p.add_argument("--retries", type=int, default=0, help="run again this many times when it fails")
    p.add_argument("--env", action="append", metavar="NAME=VALUE", help="an environment variable (repeatable)")
    p.add_argument("--cron", help='run on a schedule instead of once: "0 2 * * *" (02:00 every day), @hourly…')
    p.add_argument("--tz", help="the schedule's time zone (default Asia/Shanghai)")
    p.add_argument("--allow-overlap", action="store_true", help="start a run even while the previous one runs")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- the command, run with /bin/sh -c")
    p.set_defaults(handler=submit)
    p = jobs.add_parser("ls", help="list your jobs")
    p.add_argument("--state", choices=STATES)
    p.set_defaults(handler=ls)
    p = jobs.add_parser("show", help="a job: where it runs and why, its state and exit code")
    p.add_argument("id")
    p.set_defaults(handler=show)
    p = jobs.add_parser("logs", help="the last lines the job's command wrote")
    p.add_argument("id")
    p.add_argument("--tail", type=int, default=200, help="how many lines (1 to 5000)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the job ends")
    p.set_defaults(handler=logs)
    for verb, help_text in (("cancel", "cancel a job (its machine is released now)"), ("rerun", "run it again")):
        p = jobs.add_parser(verb, help=help_text)
        p.add_argument("id")
        p.set_defaults(handler=_action(verb))
    _register_schedules(jobs)


def _register_schedules(jobs):
    parser = jobs.add_parser("schedules", help="jobs on a cron schedule (made with `jobs submit --cron …`)")
    schedules = parser.add_subparsers(dest="schedules_command")
    schedules.add_parser("ls", help="list your schedules").set_defaults(handler=schedules_ls)
    for verb, handler, help_text in (
        ("runs", schedules_runs, "what became of its last due times"),
        ("suspend", _schedule_action("suspend"), "no run is due until resumed"),
        ("resume", _schedule_action("resume"), "due again from now on"),
        ("rm", schedules_rm, "delete it (the jobs it ran stay)"),
    ):
        p = schedules.add_parser(verb, help=help_text)
        p.add_argument("id")
        p.set_defaults(handler=handler)
