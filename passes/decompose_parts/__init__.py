"""Parts of the ``decompose`` pass (``kiln.passes.decompose``)."""
