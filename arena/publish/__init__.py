"""Votes to a published snapshot: the fit, the reads it needs, the snapshot folder and its drawing child."""
