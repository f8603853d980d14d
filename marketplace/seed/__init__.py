"""The hub's starter catalogue (hub.toml: facts; hub_cards.toml: what we say about them) and its vocabulary.

``load()`` is idempotent: items are created when missing and otherwise left as staff edited them (``update=True``
rewrites them from the files). Counters (mounts, likes) are never touched. Each entry becomes a model card —
Markdown with YAML front matter, the same format users will publish — and a file list derived from its size, except
the entries with ``built``: their files are real, made at install by ``built.py`` and committed to the repository.
"""

import hashlib
import tomllib
from decimal import Decimal
from functools import cache
from pathlib import Path

import yaml

from instances.choices import Backend

from ..choices import HubKind
from ..hub import repos, services
from ..models import HubItem
from . import built

HERE = Path(__file__).parent
FACTS_FILE = HERE / "hub.toml"
CARDS_FILE = HERE / "hub_cards.toml"
GB = 10**9
SHARD_BYTES = 5 * GB  # the usual safetensors shard size on Hugging Face
DATA_SHARD_BYTES = 2 * GB


def _read(path: Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


@cache
def vocabulary() -> dict:
    """Task names in English and Chinese, the chip families of each framework and the values the filter menus
    offer, from hub_cards.toml."""
    data = _read(CARDS_FILE)
    return {"tasks": data["tasks"], "framework_chips": data["framework_chips"], "filters": data["filters"]}


def task_names(task: str) -> dict[str, str]:
    return vocabulary()["tasks"].get(task, {})


def chips_for(kind: str, frameworks: list[str]) -> list[str]:
    """Chip families an item runs on: every family for data sets, the union over frameworks for models."""
    if kind == HubKind.DATASET:
        return [b.value for b in Backend]
    families = {f for fw in frameworks for f in vocabulary()["framework_chips"].get(fw, [])}
    return [b.value for b in Backend if b.value in families]


def _shards(total: int, shard: int, pattern: str) -> list[tuple[str, int]]:
    count = max(1, -(-total // shard))
    sizes = [shard] * (count - 1) + [total - shard * (count - 1)]
    return [(pattern.format(i=i, n=count), size) for i, size in enumerate(sizes, start=1)]


def file_list(entry: dict, library: str) -> list[tuple[str, int]]:
    """A plausible file list from the entry's size: weight or data shards plus the usual small files."""
    if "files" in entry:  # listed as they are
        return [(name, size) for name, size in entry["files"]]
    total = int(Decimal(str(entry["size_gb"])) * GB)
    if entry["kind"] == HubKind.DATASET:
        return [("README.md", 6_000), *_shards(total, DATA_SHARD_BYTES, "data/train-{i:05d}-of-{n:05d}.parquet")]
    if entry.get("frameworks") == ["paddle"]:
        small = [("README.md", 4_000), ("model_config.json", 800), ("vocab.txt", 180_000)]
        return [*small, ("model_state.pdparams", total)]
    if library == "diffusers":
        small = [("README.md", 8_000), ("model_index.json", 600)]
        return small + _shards(total, SHARD_BYTES, "unet/diffusion_pytorch_model-{i:05d}-of-{n:05d}.safetensors")
    small = [("README.md", 8_000), ("config.json", 1_000), ("generation_config.json", 200)]
    small += [("tokenizer.json", 7_000_000)]
    if total <= SHARD_BYTES:
        return [*small, ("model.safetensors", total)]
    shards = _shards(total, SHARD_BYTES, "model-{i:05d}-of-{n:05d}.safetensors")
    return [*small, ("model.safetensors.index.json", 30_000), *shards]


def card(entry: dict, extra: dict) -> str:
    """A short, honest model card: front matter from the facts, the title, the summaries and the note.

    The facts (size, licence, frameworks) and where a mount appears are the page's translated sidebar, so the card
    holds no English platform text of its own."""
    front = {"license": entry.get("license", ""), "pipeline_tag": entry.get("task", "")}
    if extra.get("library_name"):
        front["library_name"] = extra["library_name"]
    front |= {"language": entry.get("languages", []), "tags": extra.get("tags", [])}
    name = entry["repo"].split("/", 1)[1]
    lines = [
        "---",
        yaml.safe_dump(front, allow_unicode=True, sort_keys=False).strip(),
        "---",
        f"# {name}",
        "",
        extra.get("summary", ""),
        "",
        extra.get("summary_zh", ""),
        "",
    ]
    if entry.get("note"):
        lines += [f"Note: {entry['note']}.", ""]
    return "\n".join(lines)


# The cards ``card()`` wrote while they still held an English facts table and a "Use it on this platform" section
# (the first 16 hex digits of their SHA-256). An item whose card is still one of them was never edited by staff,
# so ``load()`` gives it the current card without waiting for ``update``.
PLATFORM_SECTION_CARDS = frozenset(
    {
        "06968727ba504e53",
        "07e9e858e106c93d",
        "10fac75e64e5cf73",
        "136e03a1eb52201e",
        "1473909e56e0e6de",
        "14f5b3e2877304ed",
        "17994b9ddae41e7e",
        "20d4061a424305b9",
        "21625245672dfd96",
        "2a57acf15ca41481",
        "3a8bbda8c1fae513",
        "4133c346802af0c0",
        "50ece72dacfb9914",
        "68a5545e707180c3",
        "6bcc56bd55f570fa",
        "72a73246d3ed34f0",
        "82737454e8713013",
        "93808428e6b1c790",
        "a23e302f726d302a",
        "a4ea26bd5d8ab781",
        "aa68622b1fee1717",
        "b4355c72d6039e0f",
        "b4cf2c835ac02522",
        "bf1fbb35edad817c",
        "c9c859f8bb508ff8",
        "d26ff0c7d1a36538",
        "d3bb0d2f9b9a1045",
        "defc7c8023600c80",
        "e0f98dd04a6773cc",
        "f3474b9564c513a9",
        "f8410bb81bbb3897",
    }
)


def has_platform_section(card_text: str) -> bool:
    return hashlib.sha256(card_text.strip().encode()).hexdigest()[:16] in PLATFORM_SECTION_CARDS


def entries() -> list[dict]:
    """The starter entries with everything ``services.save_item`` needs."""
    facts, cards = _read(FACTS_FILE), _read(CARDS_FILE)["cards"]
    rows = [e | {"kind": HubKind.MODEL} for e in facts.get("model", [])]
    rows += [e | {"kind": HubKind.DATASET} for e in facts.get("dataset", [])]
    result = []
    for entry in rows:
        extra = cards.get(entry["repo"], {})
        frameworks = entry.get("frameworks", [])
        params = entry.get("params_b")
        contents = built.files(entry["built"]) if entry.get("built") else None
        if contents is not None:  # real files: the list and sizes are theirs
            files = [(path, len(content)) for path, content in sorted(contents.items())]
            entry = entry | {"size_gb": Decimal(sum(size for _path, size in files)) / GB}
            entry.setdefault("rows", built.rows(contents) if entry["kind"] == HubKind.DATASET else None)
        else:
            files = file_list(entry, extra.get("library_name", ""))
        result.append(
            {
                "repo": entry["repo"],
                "kind": entry["kind"],
                "summary": extra.get("summary", ""),
                "summary_zh": extra.get("summary_zh", ""),
                "parameters_b": Decimal(str(params)) if params is not None else None,
                "size_bytes": int(Decimal(str(entry["size_gb"])) * GB),
                "rows": entry.get("rows"),
                "frameworks": frameworks,
                "chips": chips_for(entry["kind"], frameworks),
                "card": card(entry, extra),
                "files": files,
            }
        )
    return result


def built_entries() -> dict[str, str]:
    """The starter repositories whose files are real, with the builder that makes them (``built`` in hub.toml)."""
    facts = _read(FACTS_FILE)
    return {e["repo"]: e["built"] for kind in ("model", "dataset") for e in facts.get(kind, []) if e.get("built")}


def load(*, update: bool = False) -> dict[str, int]:
    counts = {"created": 0, "updated": 0, "kept": 0}
    rows = entries()
    starters = HubItem.objects.filter(owner__isnull=True, repo__in=[values["repo"] for values in rows])
    existing = {item.repo: item for item in starters}
    for values in rows:
        item = existing.get(values["repo"])
        if item is not None and not update:
            if has_platform_section(item.card):
                services.replace_card(item, values["card"])
                counts["updated"] += 1
            else:
                counts["kept"] += 1
            continue
        services.save_catalog_item(**values)
        counts["updated" if item is not None else "created"] += 1
    counts["with files"] = _publish_built()
    return counts


def _publish_built() -> int:
    """Commit the real files of the starter entries that have them; a new revision only where they changed."""
    for repo, name in built_entries().items():
        repos.publish_catalogue_files(repo, built.files(name), summary=f"Files built at install ({name})")
    return len(built_entries())
