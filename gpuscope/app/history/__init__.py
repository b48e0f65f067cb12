"""The History tab: past runs from the store."""
