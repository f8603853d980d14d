"""The node agent: ``gpucloud_agent.py`` is the program a compute job runs for an instance.

It ships to the nodes on its own (standard library only, one file) and imports nothing of the console.
"""
