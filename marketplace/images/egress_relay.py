"""Run a command in a network namespace of its own whose only way out is the egress proxy: listen on the
namespace's loopback at PORT, relay every connection to the proxy's unix socket SOCKET (bound in from the host),
then run COMMAND and exit with its status. Started by ``oci`` under ``bwrap --unshare-net``; a plain script (no
Django), as it runs inside that namespace.

Usage: python3 egress_relay.py SOCKET PORT -- COMMAND...
"""

import socket
import subprocess
import sys
import threading

CHUNK = 64 * 1024


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for each in (source, sink):
            try:
                each.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _address = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            continue
        threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()


def main(argv: list[str]) -> int:
    path, port, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit(__doc__)
    listener = socket.create_server(("127.0.0.1", int(port)))
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
