"""A hub item mounted in a Slurm machine: its files laid out on the zone's shared root, where the nodes see them,
readable by the instance's account alone.

The hub lays each repository out on the console's host (``LOCAL_HUB_ROOT/<repo>``, every file a hard link to its
stored blob), which the local backend binds into a sandbox. A Slurm job runs on a node as its owner's account, with
the node's file system in sight, so the same tree on the shared root, readable by every account, would give any
tenant every private repository by its name. Instead each instance gets its own copy of what it mounts:

* ``hub/``: the console's, mode 0711 (the accounts pass through it, never list it);
* ``hub/<public id>/``: the console's, group the instance's account's own group, mode 0750: that account reads it,
  no other does (an account without a group of its own is refused), and nothing in it is the account's to change
  (a mount is read-only);
* ``hub/<public id>/<repo>/``: the repository's tree, each file a hard link to the hub's own (no copy) where the
  shared root is on the same file system, else a copy. Laid out again at each mount and each start (the machine
  sees a newer commit from its next start; the local backend's see it at once).

Machines that share one account on the cluster get no hub items: every tenant of the zone could read them. The
console acts on these folders through the descriptor of ``hub/``, checked to be its own, never by a path a tenant
could have changed on the way. A machine booted from an imported image (:mod:`.slurm_image`) has ``hub/`` bound
read-only at the same path, so the links the agent makes in its home lead to the files inside too.
"""

import fcntl
import grp
import os
import shutil
import stat
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from .base import BackendError

OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MOUNT_ROOTS = ("public", "datasets")  # /root/public/<repo>, /root/datasets/<repo>


def hub_folder(config: dict) -> Path:
    """The zone's folder of mounted hub items, on its shared root."""
    return Path(config.get("hub_root") or Path(config["root"]) / "hub")


def ensure_hub_folder(config: dict) -> Path:
    """The zone's folder of mounted hub items, made if missing: the console's, passed through, never listed."""
    with _hub(config):
        return hub_folder(config)


def repo_of(target: str) -> str | None:
    """The repository a hub mount's target names (``/root/public/<org>/<name>``, ``/root/datasets/<org>/<name>``),
    or None."""
    parts = Path(target).parts
    if len(parts) != 5 or parts[:2] != ("/", "root") or parts[2] not in MOUNT_ROOTS or ".." in parts:
        return None
    return "/".join(parts[3:])


def lay_out(config: dict, public_id, repo: str, account) -> Path:
    """Lay ``repo``'s tree out for the instance whose jobs run as ``account`` (see the module's docstring) and return
    its folder."""
    _check_repo(repo)
    if not _own_group(account):
        raise BackendError(
            _(
                "The cluster account %(name)s has no group of its own: a model or dataset mounted in its machine "
                "would be readable by other accounts."
            )
            % {"name": account.name}
        )
    origin = Path(settings.LOCAL_HUB_ROOT) / repo
    with _hub(config) as hub, _instance_folder(hub, public_id, account.gid) as base:
        here = Path(f"/proc/self/fd/{base}")  # the folder itself, whatever a path to it leads to now
        fresh, stale = here / f".{uuid.uuid4().hex}", None
        try:
            os.mkdir(fresh)
            os.chmod(fresh, 0o755)  # whatever the console's umask
            with _hub_lock(origin):
                _copy_tree(origin, fresh)
            for folder in reversed(Path(repo).parents[:-1]):  # the organisation's folder of ``org/name``
                os.makedirs(here / folder, exist_ok=True)
                os.chmod(here / folder, 0o755)
            stale = here / f".{uuid.uuid4().hex}"
            try:
                os.rename(here / repo, stale)
            except FileNotFoundError:
                stale = None
            os.rename(fresh, here / repo)
        except OSError as exc:
            for leftover in (fresh, stale):  # the mount shows what it showed, or nothing: never a half copy
                if leftover is not None:
                    shutil.rmtree(leftover, ignore_errors=True)
            raise BackendError(
                _("%(repo)s could not be laid out for the machine: %(error)s") % {"repo": repo, "error": exc.strerror}
            ) from exc
        if stale is not None:
            shutil.rmtree(stale, ignore_errors=True)
    return hub_folder(config) / str(public_id) / repo


def remove(config: dict, public_id, repo: str | None = None) -> None:
    """An instance's copy of ``repo`` gone, or of everything it mounted (``repo`` None)."""
    if not hub_folder(config).exists():
        return
    with _hub(config) as hub:
        if repo is None:
            shutil.rmtree(str(public_id), dir_fd=hub, ignore_errors=True)
            return
        _check_repo(repo)
        try:
            base = os.open(str(public_id), OPEN_FOLDER, dir_fd=hub)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(base, fcntl.LOCK_EX)
            shutil.rmtree(Path(f"/proc/self/fd/{base}") / repo, ignore_errors=True)
        finally:
            os.close(base)


def _own_group(account) -> bool:
    """Whether ``account``'s group is its alone: named after it, with no other member."""
    try:
        group = grp.getgrgid(account.gid)
    except KeyError:
        return False
    return group.gr_name == account.name and set(group.gr_mem) <= {account.name}


def _check_repo(repo: str) -> None:
    parts = Path(repo).parts
    if len(parts) != 2 or repo.startswith("/") or any(part in {".", ".."} or part.startswith(".") for part in parts):
        raise BackendError(_("%(source)s cannot be mounted.") % {"source": repo})


def _own_folder(name, mode: int, *, dir_fd: int | None = None, group: int | None = None) -> int:
    """The descriptor of the folder ``name`` (under ``dir_fd``), made if missing, never through a link, checked to be
    the console's own and writable by nobody else, set to ``mode`` (and ``group`` where the console may)."""
    try:
        try:
            os.mkdir(name, mode, dir_fd=dir_fd)
        except FileExistsError:
            pass
        fd = os.open(name, OPEN_FOLDER, dir_fd=dir_fd)
    except OSError as exc:
        raise BackendError(f"{name} is not a folder of the console's: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise BackendError(f"{name} is not the console's own folder (owner {info.st_uid}, mode {info.st_mode:o})")
        if group is not None:
            try:
                os.fchown(fd, -1, group)
            except PermissionError:
                pass  # not root: the folder keeps the console's group, which the shared account's jobs have
        os.fchmod(fd, mode)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise BackendError(f"{name}: {exc.strerror}") from exc
        raise
    return fd


@contextmanager
def _hub(config: dict):
    """The descriptor of the zone's ``hub/`` (made if missing), the console's own folder."""
    path = hub_folder(config)
    if not path.parent.is_dir():
        raise BackendError(f"the zone's shared root {path.parent} is missing")
    fd = _own_folder(path, 0o711)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _instance_folder(hub: int, public_id, group: int):
    """The descriptor of the instance's folder in ``hub`` (made if missing), locked, the console's with ``group``."""
    fd = _own_folder(str(public_id), 0o750, dir_fd=hub, group=group)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one layout or removal at a time per instance
        except OSError as exc:
            raise BackendError(f"the hub folder of {public_id}: {exc.strerror}") from exc
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _hub_lock(origin: Path):
    """The hub's own lock on a repository's layout (``marketplace.hub.repos.materialise``), shared: no commit is
    being laid out while the tree is read."""
    if not origin.parent.is_dir():
        yield
        return
    fd = os.open(origin.parent / f".{origin.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _copy_tree(origin: Path, into: Path) -> None:
    """The regular files and folders under ``origin`` (none when the hub has not laid the repository out: its blobs
    are elsewhere) into ``into``: hard links to the files everyone may read (the hub's), where the file systems
    allow, else copies; folders 0755, files 0644; links are not followed."""
    if not origin.is_dir():
        return
    for folder, dirs, files in os.walk(origin, followlinks=False):
        here = into / Path(folder).relative_to(origin)
        for name in dirs:
            if not (Path(folder) / name).is_symlink():
                (here / name).mkdir()
                os.chmod(here / name, 0o755)
        for name in files:
            source = Path(folder) / name
            info = source.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_mode & stat.S_IROTH:  # as the hub keeps its files: a link shares the mode
                try:
                    os.link(source, here / name, follow_symlinks=False)
                    continue
                except OSError:  # another file system
                    pass
            shutil.copyfile(source, here / name, follow_symlinks=False)
            os.chmod(here / name, 0o644)
