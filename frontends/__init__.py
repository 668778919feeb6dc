"""kiln.frontends."""
