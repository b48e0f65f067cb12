"""The Compare tab: start-method series, verdict, start-up chart, tables and stacked timelines."""
