"""Make the reference vectors that rag-lsp's embedder is checked against.

Run once, in an environment with sentence-transformers (e.g. the export environment):

    python make_reference_vectors.py MODEL_SOURCE_DIR

MODEL_SOURCE_DIR is the sentence-transformers folder (the safetensors weights). Writes
reference_vectors.json next to this script: the texts and their vectors from
sentence-transformers itself, rounded to 7 decimals (cosine error well below 1e-6).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sentence_transformers import SentenceTransformer

HERE = Path(__file__).resolve().parent
LONG_PROSE = " ".join(
    f"Sentence {i} explains how the indexer batches files before embedding them."
    for i in range(60)
)
TEXTS = [
    "where are redirects followed?",
    "def follow_redirects(response, max_hops=5):\n"
    '    """Follow HTTP 3xx responses up to max_hops times."""\n'
    "    for _ in range(max_hops):\n"
    "        if response.status_code not in (301, 302, 303, 307, 308):\n"
    "            return response\n"
    "        response = fetch(response.headers['Location'])\n"
    "    raise TooManyRedirects(max_hops)",
    "class LRUCache:\n    def __init__(self, capacity: int) -> None:\n"
    "        self.capacity = capacity",
    "# Installation\n\nRun `make setup` to create the virtual environment and install the model.",
    "SELECT id, title FROM posts WHERE author_id = ? ORDER BY created_at DESC LIMIT 10;",
    "function debounce(fn, ms) { let t; return (...a) => "
    "{ clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }",
    "Password hashes are stored with bcrypt; the salt is per user.",
    "ünïcödé text, Кириллица, 中文字符 and emoji 🚀",
    "short",
    "a",
    "   leading and trailing whitespace   ",
    "x = 1\ny = 2\nz = x + y",
    LONG_PROSE,  # longer than 256 word-pieces: checks truncation matches
    "TODO: fix the race between the watcher and the writer thread",
    "Mean pooling over the attention mask, then L2 normalisation.",
    "",
]


def main(model_dir: str) -> None:
    model = SentenceTransformer(model_dir, device="cpu")
    vectors = model.encode(TEXTS, normalize_embeddings=True, batch_size=4)
    payload = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "made_with": "sentence-transformers SentenceTransformer.encode(normalize_embeddings=True)",
        "max_seq_length": model.max_seq_length,
        "texts": TEXTS,
        "vectors": [[round(float(x), 7) for x in row] for row in vectors],
    }
    (HERE / "reference_vectors.json").write_text(json.dumps(payload) + "\n", encoding="utf-8")
    print(f"wrote {len(TEXTS)} reference vectors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
