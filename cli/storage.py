"""`gpucloud storage ls|mkdir|rm` and `gpucloud cp` — cloud storage from the command line.

Remote paths are written ``remote:/folder/name``; the other side of ``cp`` is a local path. Uploads speak tus
1.0.0 with plain ``requests`` (the ``tuspy`` client would add aiohttp and tinydb, and hide the console's translated
error messages behind its own). Each upload's URL is remembered in ``uploads.json`` beside the CLI config, keyed
by the file's path, size and modification time and by the destination, so running the same ``cp`` again after an
interruption asks the server how much it has (HEAD) and sends only the rest.
"""

import base64
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import urljoin

import requests

from .client import Api, CliError, config_path, output

REMOTE = "remote:"
CHUNK_BYTES = 8 * 1024 * 1024
TUS = {"Tus-Resumable": "1.0.0"}


def _remote(path: str) -> str:
    return path[len(REMOTE) :] or "/"


def _check(response: requests.Response) -> requests.Response:
    if response.status_code >= 400:
        try:
            message = response.json().get("message")
        except ValueError:
            message = response.text[:200]
        raise CliError(f"{response.status_code}: {message}")
    return response


def _call(api: Api, method: str, url: str, **kwargs) -> requests.Response:
    try:
        return api.session.request(method, url, timeout=120, **kwargs)
    except requests.RequestException as exc:
        raise CliError(f"cannot reach {api.url}: {exc}") from exc


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _progress(done: int, total: int, started: float) -> None:
    rate = done / max(time.monotonic() - started, 1e-6)
    pct = 100.0 * done / total if total else 100.0
    sys.stdout.write(f"\r  {pct:5.1f}%  {_human(done)} / {_human(total)}  {_human(rate)}/s   ")
    sys.stdout.flush()


def lookup(api: Api, path: str) -> dict:
    return api.request("GET", "storage/entries/lookup", params={"path": path})


# ls, mkdir, rm -----------------------------------------------------------------------------------------------------


def ls(api: Api, args):
    path = args.path[len(REMOTE) :] if args.path.startswith(REMOTE) else args.path
    entry = lookup(api, path)
    if entry["kind"] == "file":
        entries = [entry]
    else:
        entries = api.request("GET", "storage/entries", params={"path": entry["path"], "limit": 1000})["results"]
    rows = [e | {"size": "" if e["kind"] == "folder" else _human(e["size"])} for e in entries]
    output(
        args,
        entries if args.json else rows,
        [("TYPE", "kind"), ("NAME", "name"), ("SIZE", "size"), ("MODIFIED", "updated_at")],
    )


def mkdir(api: Api, args):
    folder = api.post("storage/folders", {"path": args.path})
    print(f"created {folder['path']}")


def rm(api: Api, args):
    path = args.path[len(REMOTE) :] if args.path.startswith(REMOTE) else args.path
    entry = lookup(api, path)
    if entry["id"] is None:
        raise CliError("the root folder cannot be removed")
    if entry["kind"] == "folder" and not args.recursive:
        raise CliError(f"{entry['path']} is a folder: use -r to remove it and everything in it")
    api.delete(f"storage/entries/{entry['id']}")
    print(f"removed {entry['path']}")


# cp ----------------------------------------------------------------------------------------------------------------


def cp(api: Api, args):
    source, target = args.source, args.target
    if source.startswith(REMOTE) == target.startswith(REMOTE):
        raise CliError(f"exactly one side of cp must be remote, written {REMOTE}/path")
    if target.startswith(REMOTE):
        upload(api, Path(source), _remote(target))
    else:
        download(api, _remote(source), Path(target))


def _destination(api: Api, local: Path, remote: str) -> tuple[str, str]:
    """(folder, name) for uploading ``local`` to ``remote``: into it when it is a folder, else as that name."""
    if remote.endswith("/"):
        return remote, local.name
    try:
        entry = lookup(api, remote)
    except CliError as exc:
        if not str(exc).startswith("404"):
            raise
        entry = None
    if entry is not None and entry["kind"] == "folder":
        return entry["path"], local.name
    folder, _sep, name = remote.rpartition("/")
    return folder or "/", name


class ResumeStore:
    """Upload URLs of unfinished uploads, so a re-run of the same cp continues instead of starting over."""

    def __init__(self):
        self.path = config_path().parent / "uploads.json"

    def _load(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key: str) -> str | None:
        return self._load().get(key)

    def put(self, key: str, url: str | None) -> None:
        data = self._load()
        if url is None:
            data.pop(key, None)
        else:
            data[key] = url
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data, indent=2))
        self.path.chmod(0o600)


def _fingerprint(api: Api, local: Path, folder: str, name: str) -> str:
    stat = local.stat()
    return "|".join([api.url, str(local.resolve()), str(stat.st_size), str(stat.st_mtime_ns), folder, name])


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _resume_offset(api: Api, url: str) -> int | None:
    response = _call(api, "HEAD", url, headers=TUS)
    if response.status_code in (404, 410):
        return None
    _check(response)
    return int(response.headers["Upload-Offset"])


def _create(api: Api, size: int, folder: str, name: str) -> str:
    metadata = f"filename {_b64(name)},folder {_b64(folder)}"
    headers = TUS | {"Upload-Length": str(size), "Upload-Metadata": metadata}
    response = _check(_call(api, "POST", f"{api.url}/api/v1/storage/uploads", headers=headers))
    return urljoin(api.url + "/", response.headers["Location"])


def send_chunk(api: Api, url: str, offset: int, chunk: bytes) -> requests.Response:
    headers = TUS | {"Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream"}
    return _check(_call(api, "PATCH", url, headers=headers, data=chunk))


def upload(api: Api, local: Path, remote: str) -> None:
    if not local.is_file():
        raise CliError(f"{local}: no such file")
    size = local.stat().st_size
    folder, name = _destination(api, local, remote)
    store, key = ResumeStore(), _fingerprint(api, local, folder, name)
    url, offset = store.get(key), None
    if url:
        offset = _resume_offset(api, url)
        if offset is not None:
            print(f"resuming {local.name} at {_human(offset)} of {_human(size)}")
    if offset is None:
        url, offset = _create(api, size, folder, name), 0
        store.put(key, url)
    started = time.monotonic()
    with local.open("rb") as handle:
        handle.seek(offset)
        while offset < size:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                raise CliError(f"{local} became shorter during the upload; run cp again")
            offset = int(send_chunk(api, url, offset, chunk).headers["Upload-Offset"])
            _progress(offset, size, started)
    store.put(key, None)
    status = _check(_call(api, "GET", url, headers=TUS)).json()
    final = (status.get("entry") or {}).get("path") or f"{folder.rstrip('/')}/{name}"
    print(f"\nuploaded {local} → {REMOTE}{final}")


def download(api: Api, remote: str, local: Path) -> None:
    entry = lookup(api, remote)
    if entry["kind"] != "file":
        raise CliError(f"{entry['path']} is a folder; copy its files one by one")
    if local.is_dir():
        local = local / entry["name"]
    partial = local.with_name(local.name + ".part")
    url = f"{api.url}/api/v1/storage/entries/{entry['id']}/download"
    started, done = time.monotonic(), 0
    with _check(_call(api, "GET", url, stream=True)) as response, partial.open("wb") as out:
        for piece in response.iter_content(chunk_size=1024 * 1024):
            out.write(piece)
            done += len(piece)
            _progress(done, entry["size"], started)
    os.replace(partial, local)
    print(f"\ndownloaded {REMOTE}{entry['path']} → {local}")


# gpucloud disks ls|create|attach|detach|grow|rm -------------------------------------------------------------------

DISK_COLUMNS = [
    ("ID", "id"),
    ("NAME", "name"),
    ("GB", "size_gb"),
    ("ZONE", "zone"),
    ("STATUS", "status"),
    ("INSTANCE", "instance_name"),
    ("¥/MONTH", "per_month"),
]


def _disk_id(api: Api, name_or_id: str) -> str:
    """Disks are addressed by id or by name."""
    for disk in api.list("disks", limit=1000):
        if name_or_id in (disk["id"], disk["name"]):
            return disk["id"]
    raise CliError(f"no disk named {name_or_id}")


def disks_ls(api: Api, args):
    output(args, api.list("disks", limit=1000), DISK_COLUMNS)


def disks_create(api: Api, args):
    output(args, api.post("disks", {"name": args.name, "size_gb": args.size, "zone": args.zone}))


def disks_attach(api: Api, args):
    output(args, api.post(f"disks/{_disk_id(api, args.disk)}/attach", {"instance": args.instance}))


def disks_detach(api: Api, args):
    output(args, api.post(f"disks/{_disk_id(api, args.disk)}/detach"))


def disks_grow(api: Api, args):
    output(args, api.post(f"disks/{_disk_id(api, args.disk)}/grow", {"size_gb": args.size}))


def disks_rm(api: Api, args):
    api.delete(f"disks/{_disk_id(api, args.disk)}")
    print(f"deleted disk {args.disk}")


def _register_disks(commands):
    disks = commands.add_parser("disks", help="cloud disks (云硬盘)").add_subparsers(dest="disks_command")
    p = disks.add_parser("ls", help="list your disks")
    p.set_defaults(handler=disks_ls)
    p = disks.add_parser("create", help="create a disk (billed per GB-day until deleted)")
    p.add_argument("name")
    p.add_argument("--size", type=int, required=True, help="GB")
    p.add_argument("--zone", required=True, help="a zone slug, e.g. cn-east-xc")
    p.set_defaults(handler=disks_create)
    p = disks.add_parser("attach", help="attach a disk to an instance of its zone (hot-plug when it runs)")
    p.add_argument("disk", help="name or id")
    p.add_argument("instance", help="instance id")
    p.set_defaults(handler=disks_attach)
    p = disks.add_parser("detach", help="detach a disk from its instance")
    p.add_argument("disk", help="name or id")
    p.set_defaults(handler=disks_detach)
    p = disks.add_parser("grow", help="grow a disk (never shrink)")
    p.add_argument("disk", help="name or id")
    p.add_argument("--size", type=int, required=True, help="the new size in GB")
    p.set_defaults(handler=disks_grow)
    p = disks.add_parser("rm", help="delete a detached disk and its data")
    p.add_argument("disk", help="name or id")
    p.set_defaults(handler=disks_rm)


def register(commands):
    _register_disks(commands)
    storage = commands.add_parser("storage", help="cloud storage (云存储)").add_subparsers(dest="storage_command")
    p = storage.add_parser("ls", help="list a folder of your cloud storage")
    p.add_argument("path", nargs="?", default="/", help="folder or file, e.g. /datasets (default /)")
    p.set_defaults(handler=ls)
    p = storage.add_parser("mkdir", help="create a folder (and missing parents)")
    p.add_argument("path")
    p.set_defaults(handler=mkdir)
    p = storage.add_parser("rm", help="delete a file (or a folder with -r)")
    p.add_argument("path")
    p.add_argument("-r", "--recursive", action="store_true", help="delete a folder and everything in it")
    p.set_defaults(handler=rm)
    p = commands.add_parser("cp", help="upload or download: gpucloud cp LOCAL remote:/PATH, or the reverse")
    p.add_argument("source")
    p.add_argument("target")
    p.set_defaults(handler=cp)
