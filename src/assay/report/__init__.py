"""Reports written from verdicts and runs."""
