"""The Cleanup tab: leftovers of runs and what to do about them."""
