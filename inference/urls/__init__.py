"""Inference's pages: ``templates`` under /marketplace/inference/, ``endpoints`` under /endpoints/ (the
OpenAI-compatible proxy is at /v1/, the root: config/urls.py)."""
