"""Training code for the served models (not part of the wheel)."""
