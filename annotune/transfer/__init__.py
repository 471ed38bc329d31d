"""Learning across GPUs (Muralidharan et al.): device features and the shipped GPU table, the
choice of features, and the other GPUs' results gathered as a prior for `tune` and `predict`."""
