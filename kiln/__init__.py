"""kiln: an MLIR-style PyTorch compiler on xDSL."""

__version__ = "0.1.0"
