"""The shared kernel: errors, htmx, keys, validators, JSON bodies, CSV cells, paging, the API's error handler,
parsers, pagination and schema hook; used by every app, it imports none."""
