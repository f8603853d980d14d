"""`gpucloud teams ls|show|create|invite|accept|leave`."""

from .client import Api, CliError, load_config, output, save_config


def ls(api: Api, args):
    output(args, api.get("teams"), [("SLUG", "slug"), ("NAME", "name"), ("ROLE", "role"), ("MEMBERS", "members")])


def show(api: Api, args):
    data = api.get(f"teams/{args.slug}")
    if args.json:
        output(args, data)
        return
    print(f"{data['name']} ({data['slug']}), your role: {data['role']}")
    output(args, data["members"], [("E-MAIL", "email"), ("ROLE", "role"), ("JOINED", "joined_at")])


def create(api: Api, args):
    output(args, api.post("teams", {"name": args.name, "slug": args.slug}))


def invite(api: Api, args):
    data = api.post(f"teams/{args.slug}/invitations", {"email": args.email, "role": args.role})
    if args.json:
        output(args, data)
        return
    print(f"Invited {data['email']} as {data['role']}; the e-mailed link works until {data['expires_at']}.")


def accept(api: Api, args):
    token = args.link.rstrip("/").rsplit("/", 1)[-1]  # the whole link from the e-mail, or just its last part
    data = api.post("teams/invitations/accept", {"token": token})
    if args.json:
        output(args, data)
        return
    print(f"You joined {data['name']} ({data['slug']}) as {data['role']}.")


def token(api: Api, args):
    """Issue a read-write token for the team with the saved personal one, and save it for `--team SLUG`."""
    issued = api.post("tokens", {"name": args.name, "scope": "read_write", "team": args.slug})
    config = load_config()
    config.setdefault("team_tokens", {})[args.slug] = issued["token"]
    path = save_config(config)
    print(f"Saved a token for {args.slug} in {path}: use `gpucloud --team {args.slug} …`.")


def budget(api: Api, args):
    """Set (or with "none" clear) a member's monthly budget, by their e-mail address."""
    members = api.get(f"teams/{args.slug}")["members"]
    member = next((m for m in members if m["email"].lower() == args.email.lower()), None)
    if member is None:
        raise CliError(f"{args.email} is not a member of {args.slug}")
    amount = None if args.amount.lower() in {"none", "-"} else args.amount
    data = api.request("PATCH", f"teams/{args.slug}/members/{member['user_id']}", json={"monthly_budget": amount})
    if args.json:
        output(args, data)
        return
    shown = f"¥{data['monthly_budget']}" if data["monthly_budget"] is not None else "none"
    print(f"Monthly budget of {data['email']} in {args.slug}: {shown}.")


def leave(api: Api, args):
    me = api.get("me")
    api.delete(f"teams/{args.slug}/members/{me['id']}")
    print(f"You left {args.slug}.")


def register(commands):
    teams = commands.add_parser("teams", help="your teams, their members and invitations")
    sub = teams.add_subparsers(dest="teams_command", metavar="COMMAND", required=True)
    p = sub.add_parser("ls", help="list your teams")
    p.set_defaults(handler=ls)
    p = sub.add_parser("show", help="a team and its members")
    p.add_argument("slug")
    p.set_defaults(handler=show)
    p = sub.add_parser("create", help="create a team (you become its owner)")
    p.add_argument("slug", help="short name: lower-case letters, digits and hyphens")
    p.add_argument("name")
    p.set_defaults(handler=create)
    p = sub.add_parser("invite", help="invite an e-mail address to a team")
    p.add_argument("slug")
    p.add_argument("email")
    p.add_argument("--role", default="developer", choices=["owner", "admin", "developer", "billing", "read_only"])
    p.set_defaults(handler=invite)
    p = sub.add_parser("accept", help="accept an invitation: pass the link from the e-mail")
    p.add_argument("link")
    p.set_defaults(handler=accept)
    p = sub.add_parser("token", help="issue a token for a team and save it for `gpucloud --team SLUG …`")
    p.add_argument("slug")
    p.add_argument("--name", default="gpucloud CLI")
    p.set_defaults(handler=token)
    p = sub.add_parser("budget", help="set a member's monthly budget in CNY (or `none`)")
    p.add_argument("slug")
    p.add_argument("email")
    p.add_argument("amount")
    p.set_defaults(handler=budget)
    p = sub.add_parser("leave", help="leave a team")
    p.add_argument("slug")
    p.set_defaults(handler=leave)
