"""Inference endpoints: deploy a model as an OpenAI-compatible API, keys, the /v1 proxy and scale to zero."""
