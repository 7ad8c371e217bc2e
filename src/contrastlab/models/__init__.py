"""contrastlab.models."""
