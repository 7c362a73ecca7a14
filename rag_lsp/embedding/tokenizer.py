"""The model's own word-piece tokenizer, for embedding and for counting chunk sizes."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

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

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def prefix_chars(self, text: str, tokens: int) -> int:
        """How many characters of ``text`` its first ``tokens`` word-pieces span (all of
        ``text`` if it has no more): where to cut so the head holds about that many."""
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        return len(text) if len(offsets) <= tokens else offsets[tokens][0]
