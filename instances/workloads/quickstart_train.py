"""The quick-start images' training script: a small model trained from scratch whose loss and accuracy become the
"first convergence curve" on the instance page (SPEC §6), on any chip or none.

It fits a logistic-regression classifier to a synthetic two-class dataset by mini-batch gradient descent, in plain
Python so that it runs in every image, and appends one JSON line per scalar and step to ``$GPUCLOUD_SCALARS``
(``{"tag": "loss", "step": 10, "value": 0.73, "time": 1767225600.0}``), which the instance agent forwards. It saves
a checkpoint after every step (written whole, then renamed: a kill never leaves half of one), and on SIGUSR1 or
SIGTERM (stop, spot preemption) saves it and exits; started again, after a stop or after the machine died without a
word, it resumes from it.

    python quickstart_train.py [--steps 600] [--interval 1.0] [--checkpoint /root/data/quickstart.json]
"""

import argparse
import json
import math
import os
import random
import signal
import sys
import time
from pathlib import Path

FEATURES = 8


def dataset(n: int, seed: int = 7) -> list[tuple[list[float], int]]:
    rng = random.Random(seed)
    truth = [rng.uniform(-2, 2) for _ in range(FEATURES)]
    rows = []
    for _ in range(n):
        x = [rng.gauss(0, 1) for _ in range(FEATURES)]
        margin = sum(w * v for w, v in zip(truth, x, strict=True)) + rng.gauss(0, 0.5)
        rows.append((x, 1 if margin > 0 else 0))
    return rows


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-max(min(z, 30), -30)))


def train_step(weights: list[float], batch, rate: float) -> tuple[float, float]:
    """One gradient step on ``batch`` (in place); returns the batch's loss and accuracy before the step."""
    grad, loss, right = [0.0] * FEATURES, 0.0, 0
    for x, y in batch:
        p = _sigmoid(sum(w * v for w, v in zip(weights, x, strict=True)))
        loss -= math.log(p + 1e-12) if y else math.log(1 - p + 1e-12)
        right += (p > 0.5) == bool(y)
        for i, v in enumerate(x):
            grad[i] += (p - y) * v
    for i in range(FEATURES):
        weights[i] -= rate * grad[i] / len(batch)
    return loss / len(batch), right / len(batch)


def resume(checkpoint: Path) -> dict:
    """The state the last run saved, or a fresh one (none saved, or one this script cannot read)."""
    try:
        state = json.loads(checkpoint.read_text())
        if isinstance(state.get("step"), int) and len(state.get("weights", ())) == FEATURES:
            print(f"resuming from step {state['step']}", flush=True)
            return state
    except (OSError, ValueError, AttributeError):
        pass
    return {"step": 0, "weights": [0.0] * FEATURES}


def save(checkpoint: Path, state: dict) -> None:
    """The checkpoint written to a file beside it, then renamed over it: it is always a whole one."""
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    draft = checkpoint.with_name(f".{checkpoint.name}.{os.getpid()}")
    draft.write_text(json.dumps(state))
    os.replace(draft, checkpoint)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between steps (a bigger model's pace)")
    parser.add_argument("--checkpoint", default=os.environ.get("QUICKSTART_CHECKPOINT", "/root/data/quickstart.json"))
    options = parser.parse_args(argv)
    scalars = Path(os.environ.get("GPUCLOUD_SCALARS", "scalars.jsonl"))
    checkpoint = Path(options.checkpoint)
    state = resume(checkpoint)
    print(f"quick start: training a logistic-regression classifier for {options.steps} steps", flush=True)

    def save_and_exit(signum, _frame):
        save(checkpoint, state)
        print(f"checkpoint at step {state['step']} ({signal.Signals(signum).name})", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGUSR1, save_and_exit)
    signal.signal(signal.SIGTERM, save_and_exit)
    rows, rng = dataset(2048), random.Random(state["step"])
    scalars.parent.mkdir(parents=True, exist_ok=True)
    with scalars.open("a") as out:
        while state["step"] < options.steps:
            loss, accuracy = train_step(state["weights"], rng.sample(rows, 64), rate=0.5)
            state["step"] += 1
            now = time.time()
            for tag, value in (("loss", loss), ("accuracy", accuracy)):
                out.write(json.dumps({"tag": tag, "step": state["step"], "value": round(value, 5), "time": now}) + "\n")
            out.flush()
            save(checkpoint, state)
            time.sleep(options.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
