"""contrastlab.data."""
