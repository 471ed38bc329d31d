"""The session layer: the loop that joins strategy, builder, runner, results and emitter for
one `annotune tune`."""
