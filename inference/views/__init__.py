"""Inference pages: ``templates`` (the templates and their prices) and ``endpoints`` (deploy, an endpoint's page,
its keys and chart)."""
