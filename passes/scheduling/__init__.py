"""Helpers of the scheduling passes (``fuse``, ``tile``, ``buffer-reuse``): the dependency
graph, fusion legality and decisions, kernel and program construction, liveness."""
