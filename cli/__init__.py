"""The `gpucloud` command line: a thin client of the REST API.

Each app adds its commands in ``<app>/cli.py`` with a ``register(subparsers)`` function; ``main`` finds them.
"""
