"""Booting an imported image on the local backend: the mount points made in its root without following anything
in it, and its command and env as the machine's start command and variables."""

import os

from instances.backends import local_image


def test_mount_points_are_made_and_symlinks_in_their_place_replaced_not_followed(tmp_path):
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    host = tmp_path / "host-resolv.conf"
    host.write_text("the host's")
    (root / "etc" / "resolv.conf").symlink_to(str(host))
    (root / "tmp").symlink_to(str(tmp_path))  # a symlink where a folder is mounted
    local_image.prepare(str(root))
    assert host.read_text() == "the host's"
    assert (root / "etc" / "resolv.conf").is_file() and not (root / "etc" / "resolv.conf").is_symlink()
    assert (root / "tmp").is_dir() and not (root / "tmp").is_symlink()
    for path in local_image.MOUNT_DIRS:
        assert (root / path).is_dir()
        assert oct(os.stat(root / path).st_mode & 0o777) == oct(0o755)
    local_image.prepare(str(root))  # again, for the next machine: nothing changes


def test_the_images_entrypoint_and_cmd_are_the_start_command_in_its_working_folder():
    config = {"entrypoint": ["python3", "-u"], "cmd": ["train.py", "--epochs", "2 3"], "working_dir": "/work dir"}
    assert local_image.default_start(config).splitlines()[1:] == [
        "cd '/work dir'",
        "exec python3 -u train.py --epochs '2 3'",
    ]
    assert local_image.default_start({}).endswith("exec /bin/sh")


def test_the_images_env_and_path_are_the_machines():
    config = {"env": ["PATH=/opt/conda/bin:/bin", "LANG=C.UTF-8", "EMPTY=", "A=b=c"]}
    assert local_image.environment(config) == {
        "PATH": "/opt/conda/bin:/bin",
        "LANG": "C.UTF-8",
        "EMPTY": "",
        "A": "b=c",
    }
    assert local_image.search_path(config) == "/opt/conda/bin:/bin"
    assert local_image.search_path({}) == local_image.DEFAULT_PATH


def test_host_programs_run_through_the_hosts_loader_from_the_hosts_usr():
    argv = local_image.host_program("/usr/bin/setpriv")
    assert argv[0].startswith(f"{local_image.HOST_USR}/") and argv[1] == "--library-path"
    assert argv[3] == f"{local_image.HOST_USR}/bin/setpriv"
