"""`gpucloud ssh-keys list|add|remove` and `gpucloud ssh <instance> [command…]`."""

import argparse
import os
import shutil
from pathlib import Path

from .client import Api, CliError, output

COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("TYPE", "key_type"),
    ("FINGERPRINT", "fingerprint"),
    ("LAST USED", "last_used_at"),
]


def keys_list(api: Api, args):
    output(args, api.list("ssh-keys"), COLUMNS)


def keys_add(api: Api, args):
    path = Path(args.file).expanduser()
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from exc
    body = {"public_key": text} | ({"name": args.name} if args.name else {})
    output(args, api.post("ssh-keys", body))


def keys_remove(api: Api, args):
    api.delete(f"ssh-keys/{args.id}")
    print(f"removed SSH key {args.id}")


def ssh(api: Api, args):
    """Replace this process with the system ssh, connected through the console's SSH gateway."""
    access = api.get(f"instances/{args.instance}/ssh")
    program = shutil.which("ssh")
    if program is None:
        raise CliError("no ssh command on this machine: install an OpenSSH client")
    argv = ["ssh", "-p", str(access["port"])]
    argv += ["-i", args.identity] if args.identity else []
    argv += [f"{access['user']}@{access['host']}", *args.command]
    os.execv(program, argv)


def register(commands):
    keys = commands.add_parser("ssh-keys", help="SSH public keys that log in to your instances")
    keys_commands = keys.add_subparsers(dest="ssh_keys_command")
    p = keys_commands.add_parser("list", aliases=["ls"], help="list your SSH keys")
    p.set_defaults(handler=keys_list)
    p = keys_commands.add_parser("add", help="add a public key from a .pub file")
    p.add_argument("file", help="e.g. ~/.ssh/id_ed25519.pub")
    p.add_argument("--name", help="default: the key's comment")
    p.set_defaults(handler=keys_add)
    p = keys_commands.add_parser("remove", aliases=["rm"], help="remove an SSH key")
    p.add_argument("id")
    p.set_defaults(handler=keys_remove)
    p = commands.add_parser("ssh", help="log in to a running instance (runs the system ssh)")
    p.add_argument("instance", help="the instance's id")
    p.add_argument("-i", dest="identity", help="the private key file to use (passed to ssh)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="a command to run instead of a login shell")
    p.set_defaults(handler=ssh)
