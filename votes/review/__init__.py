"""Review over the store: anomalous voters and their flags, identity leaks, gold accuracy."""
