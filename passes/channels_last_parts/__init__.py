"""Parts of the ``channels-last`` pass (:mod:`kiln.passes.channels_last`), by pattern
family: small aten helpers, the CPU convolution backend heuristics, and the per-function
rewrite (its state, convolution layouts, channel plumbing, saved NHWC activations)."""
