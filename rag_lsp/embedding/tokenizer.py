"""The model's own word-piece tokenizer, for embedding and for counting chunk sizes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# The tokenizers library spreads a batch over a thread pool of its own, on every core (40
# files' 30k lines, a batch a file: 1.7 cores busy). Batches here are an indexing run's, whose
# writer thread runs below the searches' priority and leaves a core free, or one query's:
# each is tokenized on the thread that asks, with the interpreter let go of meanwhile. A user
# who sets the variable keeps their value.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402 - after the variable above

from rag_lsp.errors import ModelIntegrityError

MAX_MODEL_TOKENS = 256  # all-MiniLM-L6-v2 was trained with 256 word-pieces; longer input is cut


def read_tokenizer(path: str | Path) -> Tokenizer:
    """``tokenizer.json`` as the tokenizers library reads it; a damaged file is a model
    problem with a fix, not a traceback."""
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the library raises a bare Exception for any parse error
        raise ModelIntegrityError(
            f"the tokenizer file {path} cannot be read ({exc}). Reinstall the model with "
            "`rag-lsp model install`, or point `modelDir` at a complete model folder."
        ) from exc


def load_tokenizer(path: str | Path, max_length: int = MAX_MODEL_TOKENS) -> Tokenizer:
    """Load ``tokenizer.json`` set up for batched inference.

    The shipped file truncates and pads to a fixed 128; we truncate at the model's real
    limit and pad only to the longest text in a batch (padding to 128 wastes compute).
    """
    tokenizer = read_tokenizer(path)
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


class ModelTokenCounter:
    """Counts word-pieces without special tokens and without truncation.

    The BERT pre-tokenizer splits on whitespace and punctuation, so counts are additive
    across lines: ``count(a + "\\n" + b) == count(a) + count(b)``. Chunkers rely on that to
    count each line once.
    """

    def __init__(self, tokenizer_path: str | Path):
        self._tokenizer = read_tokenizer(tokenizer_path)
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    # Every call goes through ``encode_batch``, which lets go of the interpreter while it
    # tokenizes; ``encode`` holds it throughout. Chunking a file counts each of its lines, so
    # while an indexing run chunked, a search that had let go of the interpreter around a
    # native call (the model, NumPy, LanceDB) waited Python's switch interval (5 ms) to take
    # it back, at each such call: 5.3 ms at the median against 0.09 (bench/README.md,
    # "Searches during a branch switch").
    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encode([text])[0].ids)

    def counts(self, texts: Sequence[str]) -> list[int]:
        """:meth:`count` of each text, in one call (a document's lines)."""
        return [len(encoding.ids) for encoding in self._encode(texts)] if texts else []

    def prefix_chars(self, text: str, tokens: int) -> int:
        """How many characters of ``text`` its first ``tokens`` word-pieces span (all of
        ``text`` if it has no more): where to cut so the head holds about that many."""
        offsets = self._encode([text])[0].offsets
        return len(text) if len(offsets) <= tokens else offsets[tokens][0]

    def _encode(self, texts: Sequence[str]) -> list:
        return self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
