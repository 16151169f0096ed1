"""History: what the API and pages read about past runs (lists, search, statistics)."""
