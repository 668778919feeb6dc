"""kiln.backends."""
