"""Small widgets shared by several views (findings list, notes banner, status bar, labels)."""
