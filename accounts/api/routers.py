"""The router every app's API uses: paths like /api/v1/instances and /api/v1/instances/<id>, slash optional."""

from rest_framework.routers import SimpleRouter


class Router(SimpleRouter):
    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"
