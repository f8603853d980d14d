"""`manage.py ssh_gateway`: the SSH gateway into running instances (``instances.ssh_gateway``), its own process."""

import asyncio
import logging

from django.conf import settings
from django.core.management.base import BaseCommand

from instances import ssh_gateway


class Command(BaseCommand):
    help = "Serve ssh, scp and SFTP into running instances, for their owners' SSH keys (Ctrl-C stops)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.SSH_GATEWAY_HOST, help="default: SSH_GATEWAY_HOST")
        parser.add_argument("--port", type=int, default=settings.SSH_GATEWAY_PORT, help="default: SSH_GATEWAY_PORT")

    def handle(self, *args, host, port, **options):
        # asyncssh logs every step of every connection at INFO; the gateway logs each login itself.
        logging.getLogger("asyncssh").setLevel(logging.WARNING)
        self.stderr.write(f"SSH gateway on {host}:{port} (host key {ssh_gateway.host_key_path()})")
        asyncio.run(ssh_gateway.serve(host, port))
