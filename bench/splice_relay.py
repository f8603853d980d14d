"""The floor for any relay between a browser and a lab's socket, for the JupyterLab proxy benchmark:
``python -m bench.splice_relay FD SOCKET`` accepts TCP connections on the inherited listening socket ``FD``
and joins each to a new connection to the Unix socket ``SOCKET``, moving bytes both ways with ``splice(2)`` through
a pipe: the kernel hands pages from one socket to the other, and no byte is copied into this process.

It reads no HTTP, checks no cookie and adds no header: it measures the cost of the hop alone (one more process, a
TCP connection to the client, the kernel's work), which any proxy, in Python or not, pays on top of reading the
socket directly. Not for serving anybody: it admits every connection.
"""

import fcntl
import os
import socket
import sys
import threading

CHUNK = 1 << 20
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ from Python 3.10 on Linux; spelled out for older headers


def _move(source: socket.socket, target: socket.socket) -> None:
    """Bytes from ``source`` to ``target`` until ``source`` ends; then ``target`` is told no more will come."""
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass  # a pipe of the default 64 KB works, in more calls
    try:
        while moved := os.splice(source.fileno(), write_end, CHUNK, flags=os.SPLICE_F_MOVE):
            while moved:
                moved -= os.splice(read_end, target.fileno(), moved, flags=os.SPLICE_F_MOVE)
    except OSError:
        pass  # either side went away
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        os.close(read_end)
        os.close(write_end)


def main(fd: int, path: str) -> None:
    listener = socket.socket(fileno=fd)
    while True:
        client, _address = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(path)
        threading.Thread(target=_move, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_move, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
