"""The framework's floor for page benchmarks: a bare Django project (the default middleware of ``startproject``)
whose one view renders a template of about the console's page size from a list. ``bench.saturation``
serves it with the same gunicorn and workers as the console, in the same run, and reports each page against it."""
