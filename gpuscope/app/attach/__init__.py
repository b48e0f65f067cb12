"""The app's attached sessions: a job gpuscope did not start, followed in its own tab."""
