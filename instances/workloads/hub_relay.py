"""Inside a local-backend instance: the model hub at http://127.0.0.1:8860 (``HF_ENDPOINT``), with no network.

The sandbox has no network interface but its own loopback. This relay listens there and passes each connection to
the Unix socket the instance's agent serves from outside (``/run/gpucloud/hub.sock``); the agent forwards only the
hub's Hugging Face API to the console and refuses everything else. Standard library only.
"""

import socket
import sys
import threading

LISTEN = ("127.0.0.1", 8860)
SOCKET = "/run/gpucloud/hub.sock"


def pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def handle(client: socket.socket) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(SOCKET)
    except OSError:
        client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        client.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main() -> int:
    server = socket.create_server(LISTEN, reuse_port=False)
    while True:
        client, _address = server.accept()
        threading.Thread(target=handle, args=(client,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
