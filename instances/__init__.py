"""Machines: the instance state machine and its operations, capacity, the compute backends (local sandboxes, Slurm,
simulated), JupyterLab, SSH and the start command."""
