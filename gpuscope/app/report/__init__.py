"""The Report tab: the nsys timeline and summary tables of one report."""
