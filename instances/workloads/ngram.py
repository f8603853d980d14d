"""A character trigram language model: what the tiny demo endpoint serves on a CPU (``tiny_lm.py``).

It counts, over a training text, which character follows each pair of characters (and, to back off where a pair
was never seen, each single character, and the characters alone). Generating continues the prompt: the last two
characters of the context pick the next one at random in proportion to its count, sharpened or flattened by the
temperature; the same seed gives the same text. A token is one character, so usage counts are characters.

Training happens once, when the console installs the machines' runtime (``instances.runtime.tiny_model``); this
file is the model itself, standard library only, so it runs inside a machine as it is.
"""

import json
import random
from collections import Counter, defaultdict
from pathlib import Path

END = "\x03"  # ends each training document; generating it ends the answer ("stop")
MIN_ANSWER = 8  # characters before the model may end its answer: a prompt's end is often a document's end
FORMAT = "gpucloud-ngram/1"


class NgramModel:
    """Counts of next characters after two characters (``trigrams``), after one (``bigrams``) and alone."""

    def __init__(self, name: str, trigrams: dict, bigrams: dict, unigrams: dict, trained_on: int = 0):
        self.name = name
        self.trigrams = trigrams  # "ab" -> {"c": count}
        self.bigrams = bigrams  # "a" -> {"b": count}
        self.unigrams = unigrams  # "a" -> count
        self.trained_on = trained_on  # characters of training text

    # Training -----------------------------------------------------------------------------------------------

    @classmethod
    def train(cls, name: str, documents, *, min_count: int = 2) -> "NgramModel":
        """Count the characters of ``documents`` (each ends with END). Trigrams seen fewer than ``min_count``
        times are dropped (the bigrams still know them): the model stays a few hundred KB."""
        tri: defaultdict[str, Counter] = defaultdict(Counter)
        bi: defaultdict[str, Counter] = defaultdict(Counter)
        uni: Counter = Counter()
        size = 0
        for document in documents:
            text = END + document + END
            size += len(document)
            uni.update(text[1:])
            for a, b in zip(text, text[1:], strict=False):
                bi[a][b] += 1
            for a, b, c in zip(text, text[1:], text[2:], strict=False):
                tri[a + b][c] += 1
        trigrams = {}
        for context, followers in tri.items():
            kept = {c: n for c, n in followers.items() if n >= min_count}
            if kept:
                trigrams[context] = kept
        return cls(name, trigrams, {a: dict(f) for a, f in bi.items()}, dict(uni), size)

    # Files --------------------------------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        path.write_bytes(self.to_bytes())

    def to_bytes(self) -> bytes:
        """The model file: JSON with sorted keys, so the same training text gives the same bytes."""
        data = {
            "format": FORMAT,
            "name": self.name,
            "trained_on": self.trained_on,
            "trigrams": self.trigrams,
            "bigrams": self.bigrams,
            "unigrams": self.unigrams,
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def load(cls, path: Path) -> "NgramModel":
        data = json.loads(Path(path).read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"{path} is not a {FORMAT} model")
        return cls(data["name"], data["trigrams"], data["bigrams"], data["unigrams"], data.get("trained_on", 0))

    # Generating ---------------------------------------------------------------------------------------------

    def followers(self, context: str) -> dict:
        """What may follow ``context``: by its last two characters, else its last one, else any character."""
        pair = (END + END + context)[-2:]
        return self.trigrams.get(pair) or self.bigrams.get(pair[-1]) or self.unigrams

    def generate(self, context: str, *, max_tokens: int, temperature: float = 1.0, seed=None, stop=()):
        """Yield characters continuing ``context``, at most ``max_tokens``; the generator's return value is the
        finish reason: "stop" (the model ended the text, or a ``stop`` string came) or "length"."""
        rng = random.Random(seed)
        text = context
        produced = ""
        for _ in range(max_tokens):
            followers = self.followers(text)
            if len(produced) < MIN_ANSWER:
                followers = {c: n for c, n in followers.items() if c != END} or self._no_end(text)
            char = self._pick(followers, rng, temperature)
            if char == END:
                return "stop"
            text += char
            produced += char
            if any(s and produced.endswith(s) for s in stop):
                return "stop"
            yield char
        return "length"

    def _no_end(self, context: str) -> dict:
        """What may follow ``context`` other than the end of the text (backing off to one character, then none)."""
        for followers in (self.bigrams.get(context[-1:], {}), self.unigrams):
            found = {c: n for c, n in followers.items() if c != END}
            if found:
                return found
        return {" ": 1}

    @staticmethod
    def _pick(followers: dict, rng: random.Random, temperature: float) -> str:
        choices = sorted(followers)
        if temperature <= 0:
            return max(choices, key=lambda c: (followers[c], c))
        weights = [followers[c] ** (1.0 / temperature) for c in choices]
        return rng.choices(choices, weights=weights)[0]
