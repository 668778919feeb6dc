"""kiln.tools."""
