"""The console in a process of its own, for the JupyterLab proxy benchmark: ``python -m instances.tests.lab_console
FD`` serves ``config.asgi:application`` under uvicorn (as the Procfile's web process does) on the listening socket
``FD`` it inherits, with the ``LAB_BACKEND`` backend's ``jupyter()`` answering the one Jupyter server the benchmark
started (``LAB_SOCKET``, ``LAB_TOKEN``, ``LAB_BASE_PATH``) for any of its instances.
"""

import os
import socket
import sys

import uvicorn

from config.asgi import application
from instances.backends import JupyterServer, get_backend


def main(fd: int) -> None:

    server = JupyterServer(
        token=os.environ["LAB_TOKEN"], base_path=os.environ["LAB_BASE_PATH"], socket=os.environ["LAB_SOCKET"]
    )
    get_backend(os.environ["LAB_BACKEND"]).jupyter = lambda instance: server
    # A socket object of the inherited descriptor's own family: uvicorn's ``fd=`` takes any descriptor for a Unix
    # socket, and asyncio then leaves Nagle's algorithm on, which a TCP listener of the Procfile's never has.
    config = uvicorn.Config(application, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


if __name__ == "__main__":
    main(int(sys.argv[1]))
