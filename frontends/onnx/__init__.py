"""The ONNX frontend: `import_onnx` turns an ONNX model into a `graph`-dialect
module plus the weight store its `graph.constant` ops refer to."""

from ziggurat.frontends.onnx.importer import CONVERTERS, ImportedModel, ShapeMismatchWarning, import_onnx

__all__ = ["CONVERTERS", "ImportedModel", "ShapeMismatchWarning", "import_onnx"]
