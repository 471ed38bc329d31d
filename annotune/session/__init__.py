"""The session layer: the loop that joins strategy, builder, runner, results and emitter for
one `annotune tune` (`tuner`), and the options it runs with, merged once (`options`)."""
