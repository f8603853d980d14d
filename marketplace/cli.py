"""`gpucloud hub search QUERY` and `gpucloud hub show ORG/NAME`."""

from decimal import Decimal

from console.cli.client import Api, CliError, output

SIZE_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def _size(size_bytes) -> str:
    amount, unit = Decimal(int(size_bytes or 0)), 0
    while amount >= 1000 and unit < len(SIZE_UNITS) - 1:
        amount, unit = amount / 1000, unit + 1
    return f"{amount.quantize(Decimal('0.1')).normalize():f} {SIZE_UNITS[unit]}"


def search(api: Api, args):
    params = {"q": args.query, "kind": args.kind, "chip": args.chip, "sort": args.sort, "limit": args.limit}
    body = api.get("hub", **{k: v for k, v in params.items() if v})
    if args.json:
        output(args, body)
        return
    rows = [r | {"size": _size(r["size_bytes"]), "chips": ",".join(r["chips"])} for r in body["results"]]
    columns = [("REPO", "repo"), ("KIND", "kind"), ("TASK", "task"), ("SIZE", "size"), ("CHIPS", "chips")]
    output(args, rows, columns + [("MOUNTS", "mount_count"), ("LIKES", "likes_count")])
    shown = len(rows)
    total = f"{body['count']}" + ("" if body.get("count_exact", True) else "+")
    print(f"{shown} of {total} shown")


def show(api: Api, args):
    org, slash, name = args.repo.strip("/").partition("/")
    if not slash or not org or not name or "/" in name:
        raise CliError("give the item as ORG/NAME, e.g. THUDM/chatglm3-6b")
    item = api.get(f"hub/{org}/{name}")
    if args.json:
        output(args, item)
        return
    for key in ("repo", "kind", "task", "licence", "summary", "mount_path", "mount_count", "likes_count"):
        print(f"{key}: {item[key]}")
    params = f"; parameters: {item['parameters_b']} B" if item["parameters_b"] else ""
    print(f"size: {_size(item['size_bytes'])}{params}")
    for row in item["chip_prices"]:
        price = "not offered yet"
        if row["per_card_hour"]:
            price = f"from ¥{Decimal(row['per_card_hour']).normalize():f}/card-hour on {row['chip_name']}"
        print(f"chip {row['family']}: {price}")
    print(f"files ({len(item['files'])}):")
    for entry in item["files"]:
        print(f"  {entry['path']}  {_size(entry['size_bytes'])}")


def register(commands):
    hub = commands.add_parser("hub", help="the model & dataset hub").add_subparsers(dest="hub_command")
    p = hub.add_parser("search", help="search models and datasets (Chinese or English)")
    p.add_argument("query", nargs="?", default="", help="words, e.g. 对话 or 'qwen 7b'")
    p.add_argument("--kind", choices=["model", "dataset"])
    p.add_argument("--chip", choices=["npu", "mlu", "dcu", "cuda"], help="only items that run on this chip family")
    p.add_argument("--sort", choices=["mounts", "likes", "newest", "name"])
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(handler=search)
    p = hub.add_parser("show", help="show one item with its files and chip prices")
    p.add_argument("repo", metavar="ORG/NAME")
    p.set_defaults(handler=show)
