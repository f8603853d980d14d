"""The local backend's seccomp filter: system calls a machine never needs, refused with EPERM.

Docker's default profile is the reference: what it refuses to a container without extra capabilities is refused
here too, although the machine's user is root of its own user namespace and holds every capability there. The
filter is built with libseccomp (through ``pyseccomp``, a ctypes binding with libseccomp's own Python API) into a
BPF program that bubblewrap loads (``--seccomp FD``) after it has made the machine's mounts, right before it runs
the machine's init; every process inside inherits it. A shell that enters a running machine (SSH, ``nsenter``)
loads the same program (:data:`LOADER`) before it runs anything of the user's.

Refused: kernel modules and kexec, the kernel keyring, BPF, perf events, userfaultfd, io_uring, mounting and
pivoting (bubblewrap made the mounts already), entering or making namespaces (``setns``, ``unshare`` and ``clone``
with a namespace flag; ``clone3``, whose flags a filter cannot read, answers ENOSYS so the C library falls back to
``clone``), file handles (``open_by_handle_at``), the clocks, swap, reboot, the kernel log, accounting, quotas,
``personality`` flags that turn off address-space randomisation, and the legacy calls Docker refuses. ``ptrace``
stays allowed (debuggers, py-spy): the machine sees only its own processes.
"""

import errno
import tempfile

import pyseccomp as seccomp

DENIED = (
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "settimeofday",
    "create_module",
    "delete_module",
    "finit_module",
    "init_module",
    "get_kernel_syms",
    "query_module",
    "iopl",
    "ioperm",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "request_key",
    "lookup_dcookie",
    "mount",
    "umount2",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "name_to_handle_at",
    "open_by_handle_at",
    "nfsservctl",
    "perf_event_open",
    "pivot_root",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "setns",
    "swapon",
    "swapoff",
    "sysfs",
    "_sysctl",
    "syslog",
    "uselib",
    "userfaultfd",
    "ustat",
    "vhangup",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    "adjtimex",
)
# Namespace flags of clone(2) and unshare(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET,
# NEWTIME.
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)
# personality(2) flags that weaken the address space: ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT,
# READ_IMPLIES_EXEC. 0xffffffff (a query) is allowed.
PERSONALITY_FLAGS = (0x0040000, 0x0100000, 0x0200000, 0x0400000)
QUERY_BIT = 0x80000000


def unavailable() -> str:
    """Why this host cannot build the filter, or "" when it can."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as exc:  # the binding, or libseccomp.so.2 itself, is missing
        return f"no libseccomp here ({exc}): apt-get install libseccomp2, pip install pyseccomp"
    return ""


def build() -> bytes:
    """The filter as a BPF program for this host's architecture."""
    refuse = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED:
        try:
            rules.add_rule(refuse, name)
        except (OSError, RuntimeError, ValueError):
            pass  # a call this architecture does not have
    for call in ("clone", "unshare"):
        for flag in NAMESPACE_FLAGS:
            rules.add_rule(refuse, call, seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in PERSONALITY_FLAGS:
        # The flag set and the top bit clear: a query (0xffffffff) sets every bit, a real persona never the top.
        rules.add_rule(refuse, "personality", seccomp.Arg(0, seccomp.MASKED_EQ, flag | QUERY_BIT, flag))
    with tempfile.TemporaryFile() as out:  # export_bpf writes to a real file's descriptor
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


_program: bytes | None = None


def program() -> bytes:
    """The BPF program, built once per process."""
    global _program
    if _program is None:
        _program = build()
    return _program


# Loads the BPF program in argv[1] into the current process (no_new_privs set first, as the kernel requires of a
# process without CAP_SYS_ADMIN) and runs argv[2:]. Run as ``python -I -S -c LOADER``: no site, no user site, no
# environment, so nothing the machine wrote runs before the filter is in place.
LOADER = """\
import ctypes, os, sys
data = open(sys.argv[1], "rb").read()
buffer = ctypes.create_string_buffer(data, len(data))
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Program(len(data) // 8, ctypes.addressof(buffer))
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):
    sys.exit("cannot load the seccomp filter: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[2], sys.argv[2:])
"""
