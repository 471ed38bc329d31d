"""The bottom layer: the records that flow between stages, located errors and safe file writes."""
