"""`gpucloud hub search QUERY`, `gpucloud hub show ORG/NAME`, and the image marketplace:
`gpucloud images ls [QUERY]`, `gpucloud images show IMAGE`, `gpucloud images clone IMAGE [--mine]`,
`gpucloud images import REF [--username U] [--password-stdin]` (or `--archive PATH` in cloud storage),
`gpucloud images family IMAGE [FAMILY]` and `gpucloud images rm IMAGE`."""

import sys
from decimal import Decimal

from .client import Api, CliError, output

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


def images_ls(api: Api, args):
    params = {
        "q": args.query,
        "category": args.category,
        "backend": args.backend,
        "chip": args.chip,
        "framework": args.framework,
        "os": args.os,
        "sort": args.sort,
        "limit": args.limit,
        "mine": "true" if args.mine else None,
    }
    body = api.get("images", **{k: v for k, v in params.items() if v})
    if args.json:
        output(args, body)
        return
    rows = [
        r
        | {
            "families": ",".join(v["family"] or "cpu" for v in r["variants"]),
            "size": _size(r["size_bytes"]),
            "rating": f"{r['rating_average']} ({r['rating_count']})" if r["rating_count"] else "-",
        }
        for r in body["results"]
    ]
    columns = [("SLUG", "slug"), ("NAME", "name"), ("CATEGORY", "category"), ("CHIPS", "families")]
    output(args, rows, columns + [("SIZE", "size"), ("LAUNCHES", "usage_count"), ("RATING", "rating")])
    print(f"{len(rows)} of {body['count']} shown")


def images_show(api: Api, args):
    image = api.get(f"images/{args.image}")
    if args.json:
        output(args, image)
        return
    for key in ("slug", "name", "category", "publisher", "review_state", "status", "usage_count", "summary"):
        print(f"{key}: {image[key]}")
    print(f"size: {_size(image['size_bytes'])}; frameworks: {', '.join(image['frameworks'])}")
    for variant in image["variants"]:
        stack = ", ".join(variant["stack"])
        print(f"variant {variant['family'] or 'cpu'}: {variant['slug']} on {variant['os']} ({stack})")
    for offer in image["offers"]:
        price = "not offered yet"
        if offer["per_card_hour"]:
            price = f"from ¥{Decimal(offer['per_card_hour']).normalize():f}/card-hour on {offer['chip_name']}"
            price += f" ({offer['free_cards']} cards free)"
        print(f"runs on {offer['family']}: {price}")
    if image["review_reason"]:
        print(f"review: {image['review_reason']}")
    _print_import(image)


def _print_import(image) -> None:
    imported = image.get("imported")
    if not imported:
        return
    checks = imported["checks"]
    print(f"imported from: {imported['reference'] or imported['archive']} ({imported['step']}) {imported['digest']}")
    if image["status_detail"]:
        print(f"failed: {image['status_detail']}")
    if checks:
        found = {"shell": checks["shell"], "python": bool(checks["python"]), "jupyterlab": bool(checks["jupyterlab"])}
        print("holds: " + ", ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in found.items()))
        print(f"chip family suggested: {checks['family'] or 'none (CPU)'}")
    family = image["variants"][0]["family"] if image["variants"] else ""
    confirmed = "confirmed" if imported.get("family_confirmed") else "not confirmed yet"
    print(f"chip family: {family or 'none (CPU)'} ({confirmed})")
    command = [*imported["config"].get("entrypoint", []), *imported["config"].get("cmd", [])]
    if command:
        print(f"command: {' '.join(command)}")


def images_clone(api: Api, args):
    body = {"target": "my_images" if args.mine else "instance"}
    if args.name:
        body["name"] = args.name
    result = api.post(f"images/{args.image}/clone", body)
    if args.json:
        output(args, result)
        return
    if "image" in result:
        print(f"cloned into your images: {result['image']['slug']} (private)")
        return
    instance = result["instance"]
    print(
        f"launched {instance['name']} ({instance['id']}) on {instance['chip'] or 'no-card mode'} "
        f"with {instance['image']}: {instance['status']}"
    )


def images_import(api: Api, args, stdin=None):
    if bool(args.reference) == bool(args.archive):
        raise CliError("give a reference or --archive PATH (a docker save or OCI tar in your cloud storage)")
    body, endpoint = ({"reference": args.reference}, "images/import")
    if args.archive:
        if args.username or args.password_stdin:
            raise CliError("an archive needs no registry user or password")
        body, endpoint = ({"archive": args.archive}, "images/import-archive")
    if args.username:
        body["username"] = args.username
    if args.password_stdin:
        if not args.username:
            raise CliError("--password-stdin needs --username")
        password = (stdin or sys.stdin).read()
        body["password"] = password[:-1] if password.endswith("\n") else password
    if args.name:
        body["name"] = args.name
    image = api.post(endpoint, body)
    if args.json:
        output(args, image)
        return
    source = image["imported"]["reference"] or image["imported"]["archive"]
    print(f"importing {source} as {image['slug']} (private): {image['status']}")
    print(f"follow it with: gpucloud images show {image['slug']}")


def images_family(api: Api, args):
    body = {} if args.family is None else {"family": "" if args.family == "cpu" else args.family}
    image = api.patch(f"images/{args.image}", body)
    if args.json:
        output(args, image)
        return
    family = image["variants"][0]["family"] if image["variants"] else ""
    print(f"{image['slug']} is for {family or 'no chip family (CPU only)'}")


def images_rm(api: Api, args):
    api.delete(f"images/{args.image}")
    if args.json:
        output(args, {"removed": args.image})
        return
    print(f"removed {args.image}")


def _register_images(commands):
    images = commands.add_parser("images", help="the image marketplace").add_subparsers(dest="images_command")
    p = images.add_parser("ls", help="browse and search images (Chinese or English)")
    p.add_argument("query", nargs="?", default="", help="words, e.g. 昇腾 or pytorch")
    p.add_argument("--category", choices=["xinchuang", "framework", "case_study", "community"])
    p.add_argument("--backend", choices=["npu", "mlu", "dcu", "cuda", "cpu"], help="images with a variant for it")
    p.add_argument("--chip", help="a chip slug, e.g. ascend-910b")
    p.add_argument("--framework", help="e.g. MindSpore or PyTorch")
    p.add_argument("--os", choices=["ubuntu", "openeuler", "kylin", "uos"])
    p.add_argument("--sort", choices=["popular", "newest", "rating"])
    p.add_argument("--mine", action="store_true", help="only your own images")
    p.add_argument("--limit", type=int, default=24)
    p.set_defaults(handler=images_ls)
    p = images.add_parser("show", help="an image with its variants and live prices")
    p.add_argument("image", metavar="IMAGE", help="a slug or id")
    p.set_defaults(handler=images_show)
    p = images.add_parser("clone", help="launch the image on the cheapest compatible chip with free cards")
    p.add_argument("image", metavar="IMAGE", help="a slug or id")
    p.add_argument("--mine", action="store_true", help="copy it into your images instead of launching it")
    p.add_argument("--name", help="the instance's (or the copy's) name")
    p.set_defaults(handler=images_clone)
    p = images.add_parser("import", help="import a container image from a registry or an archive as your image")
    p.add_argument("reference", metavar="REF", nargs="?", help="registry/namespace/name:tag or …@sha256:<digest>")
    p.add_argument("--archive", metavar="PATH", help="instead: a docker save or OCI tar in your cloud storage")
    p.add_argument("--username", help="the registry user, for a private registry")
    p.add_argument("--password-stdin", action="store_true", help="read the registry password or token from stdin")
    p.add_argument("--name", help="the image's name (default: the reference's name)")
    p.set_defaults(handler=images_import)
    p = images.add_parser("family", help="confirm or correct the chip family of one of your imported images")
    p.add_argument("image", metavar="IMAGE", help="a slug or id")
    p.add_argument(
        "family", nargs="?", choices=["npu", "mlu", "dcu", "cuda", "cpu"], help="cpu: none; left out: the suggested"
    )
    p.set_defaults(handler=images_family)
    p = images.add_parser("rm", help="remove one of your imported images")
    p.add_argument("image", metavar="IMAGE", help="a slug or id")
    p.set_defaults(handler=images_rm)


def register(commands):
    _register_images(commands)
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
