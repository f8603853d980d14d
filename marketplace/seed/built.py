"""Starter entries whose files are real: made at install from what ships with the console, nothing downloaded.

Each builder returns the repository's whole tree (path → bytes), byte for byte the same on every machine with the
same release, so ``load_hub`` commits a new revision only when the source changed.
"""

import csv
import io
import json
from functools import cache

from catalog import seed as catalog_seed
from instances.runtime import tiny_model

CHIP_COLUMNS = [
    "slug",
    "vendor",
    "name",
    "name_zh",
    "backend",
    "xinchuang",
    "memory_gb",
    "memory_type",
    "memory_bandwidth_tbs",
    "tflops_bf16",
    "tflops_fp16",
    "measured_tflops_bf16",
    "measured_tflops_fp16",
    "mfu",
    "interconnect",
    "interconnect_gbs",
    "glm70b_tokens_per_s",
    "note",
]


@cache  # one process builds it once: every load_hub (each test's, too) reuses it
def console_zh_en() -> dict[str, bytes]:
    """The console's own interface strings with their Chinese translations, one JSON object a line (``en``,
    ``zh``): a small parallel corpus of product language, sorted by the English; the pairs the tiny model trains
    on."""
    pairs = sorted(set(tiny_model.translated()))
    lines = (json.dumps({"en": en, "zh": zh}, ensure_ascii=False) for en, zh in pairs)
    return {"data/train.jsonl": ("\n".join(lines) + "\n").encode()}


def chip_figures() -> dict[str, bytes]:
    """The chips the catalogue lists with the figures the operator published (memory, TFLOPS, MFU, throughput),
    as one CSV: blank where a source gives no figure."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CHIP_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for chip in catalog_seed.read()["chip"]:
        writer.writerow({column: _cell(chip.get(column)) for column in CHIP_COLUMNS})
    return {"chips.csv": out.getvalue().encode()}


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@cache  # training takes a second or two: once a process
def ngram_zh_en_tiny() -> dict[str, bytes]:
    """The tiny character model the CPU-only inference template serves, trained as the machines' runtime trains
    it (``instances.runtime.tiny_model``): the same text gives the same file."""
    return {tiny_model.FILE_NAME: tiny_model.train().to_bytes()}


BUILDERS = {"console-zh-en": console_zh_en, "chip-figures": chip_figures, "ngram-zh-en-tiny": ngram_zh_en_tiny}


def files(name: str) -> dict[str, bytes]:
    return BUILDERS[name]()


def rows(contents: dict[str, bytes]) -> int:
    """Records in a built data set: lines of its JSON Lines files and of its CSV files less their headers."""
    total = 0
    for path, content in contents.items():
        if path.endswith((".jsonl", ".csv")):
            total += content.count(b"\n") - (1 if path.endswith(".csv") else 0)
    return total
