"""The node agent moved to ``agent/gpucloud_agent.py``. Slurm jobs submitted before the move (and a requeued spot
job) still name this path in their batch script: running it runs the agent where it lives now."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "agent" / "gpucloud_agent.py"), run_name="__main__")
