"""Canonicalization patterns, one module per dialect (see aten.py)."""
