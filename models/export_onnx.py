"""Export all-MiniLM-L6-v2 from its safetensors weights to ONNX.

Runs in a throwaway build environment (see models/export-requirements.txt), never at
rag-lsp run time: `rag-lsp model install` creates that environment, runs this script and
checks the result against models/manifest.json.

    python export_onnx.py SOURCE_DIR OUTPUT_FILE

SOURCE_DIR holds the Hugging Face files (config.json, model.safetensors). The graph takes
input_ids, attention_mask and token_type_ids (int64, dynamic batch and sequence axes) and
returns last_hidden_state; pooling and normalisation happen in rag-lsp, so the same graph
also matches the official ONNX export on the Hugging Face hub.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModel

OPSET = 17


class _Encoder(torch.nn.Module):
    """Calls the model with keyword arguments (positional order differs across versions)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        return out.last_hidden_state


def export(source_dir: Path, output_file: Path) -> None:
    # Eager attention keeps the graph free of SDPA ops the classic exporter handles poorly.
    model = AutoModel.from_pretrained(str(source_dir), attn_implementation="eager")
    model.eval()
    encoder = _Encoder(model).eval()
    batch, seq = 2, 16
    inputs = (
        torch.ones(batch, seq, dtype=torch.long),
        torch.ones(batch, seq, dtype=torch.long),
        torch.zeros(batch, seq, dtype=torch.long),
    )
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    output_file.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        # torch >= 2.9 defaults to the dynamo exporter; the classic one gives a stable,
        # self-contained single-file graph.
        torch.onnx.export(
            encoder,
            inputs,
            str(output_file),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    torch.manual_seed(0)
    export(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"exported {sys.argv[2]}")
