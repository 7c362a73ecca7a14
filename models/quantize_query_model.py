"""Make the query model: model.onnx with its weights stored in 8 bits, for search queries.

Runs in the throwaway build environment (see models/export-requirements.txt), right after
export_onnx.py, never at rag-lsp run time:

    python quantize_query_model.py MODEL_ONNX OUTPUT_FILE

Why: a server embeds one short query at a time, and the full model's session held ~98 MB of a
server's memory for it; this one holds ~39 MB (24 MB file against 90 MB). Documents are still
embedded by model.onnx, so the index and the shared embedding cache hold the same vectors as
before. Measured against model.onnx on 1,299 queries: cosine 0.9979 at least, 0.9992 on average;
code retrieval NDCG@10 0.873 either way, SciFact 0.6669 against 0.6674 (vector) and 0.7286
against 0.7274 (hybrid) (bench/README.md, "The query model").

- Every MatMul's weights: 8-bit, symmetric, a scale per block of 32 along the input axis
  (onnxruntime's MatMulNBits). Accuracy level 4 lets onnxruntime quantize each row of the
  activations to 8 bits for an integer product; the blocks keep that close (0.9992 on
  average, against 0.9935 for whole-tensor dynamic quantization, which lost 0.006 NDCG@10
  on SciFact).
- The word-piece embedding table (30,522 x 384, half the file): 8 bits, dequantized on
  lookup.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

BITS = 8
BLOCK_SIZE = 32
ACCURACY_LEVEL = 4  # int8 activations in the product (see above)


def quantize(model_onnx: Path, output_file: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lookups = Path(tmp) / "lookups.onnx"
        # Only the embedding lookups (Gather): the MatMuls are done by the block quantizer.
        quantize_dynamic(str(model_onnx), str(lookups), weight_type=QuantType.QUInt8,
                         op_types_to_quantize=["Gather"])
        quantizer = MatMulNBitsQuantizer(onnx.load(str(lookups)), bits=BITS,
                                         block_size=BLOCK_SIZE, is_symmetric=True,
                                         accuracy_level=ACCURACY_LEVEL,
                                         op_types_to_quantize=("MatMul",))
        quantizer.process()
        output_file.parent.mkdir(parents=True, exist_ok=True)
        quantizer.model.save_model_to_file(str(output_file), use_external_data_format=False)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    quantize(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"wrote {sys.argv[2]}")
