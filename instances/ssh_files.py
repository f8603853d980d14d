"""SFTP and scp for the SSH gateway: served from the instance's home folder on the console's host.

asyncssh's chroot maps a client's path to a host path by text alone. The home folder is the user's: from a shell
in the instance they can put a symlink there that points anywhere on the console's host (``ln -s / escape``), and
the gateway would follow it with its own rights. So a path is refused when its folder resolves outside the home,
or when it is a symlink that does.
"""

import os
import posixpath

import asyncssh


class HomeSFTPServer(asyncssh.SFTPServer):
    """SFTP rooted at ``chroot`` (the instance's home): nothing outside it is reachable, through symlinks either.
    A gateway running as root (to enter sandboxes) gives what it creates to the home's owner, as if the user had
    written it from inside."""

    def __init__(self, chan, chroot: bytes):
        super().__init__(chan, chroot=chroot)
        self.root = os.path.realpath(chroot)
        home = os.stat(self.root)
        self.owner = (home.st_uid, home.st_gid) if os.geteuid() == 0 else None

    def _inside(self, path: bytes) -> bool:
        return path == self.root or path.startswith(self.root + b"/")

    def map_path(self, path: bytes) -> bytes:
        local = super().map_path(path)
        if local == self.root:
            return local
        folder, name = posixpath.split(local)
        real_folder = os.path.realpath(folder)
        mapped = posixpath.join(real_folder, name)
        if not self._inside(real_folder) or (os.path.islink(mapped) and not self._inside(os.path.realpath(mapped))):
            raise asyncssh.SFTPPermissionDenied("Outside the instance's home folder")
        return mapped

    def open(self, path, pflags, attrs):
        file = super().open(path, pflags, attrs)
        if self.owner and pflags & asyncssh.FXF_CREAT:
            os.fchown(file.fileno(), *self.owner)
        return file

    def exit(self):
        # A finished transfer says so: without an exit status the client's ssh ends with 255 and scp with 1.
        self.channel.exit(0)

    def mkdir(self, path, attrs):
        super().mkdir(path, attrs)
        if self.owner:
            os.lchown(self.map_path(path), *self.owner)


class RefusingSFTPServer(asyncssh.SFTPServer):
    """No file access for this instance: ``reason`` goes to the client's stderr and the session ends. Every
    path is refused in case a request arrives before the close."""

    def __init__(self, chan, reason: str):
        super().__init__(chan)
        self.reason = reason
        chan.write_stderr(f"{reason}\n".encode())
        chan.exit(1)

    def map_path(self, path: bytes) -> bytes:
        raise asyncssh.SFTPPermissionDenied(self.reason)
