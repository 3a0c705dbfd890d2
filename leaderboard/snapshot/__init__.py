"""A snapshot folder: written and read back, diffed, its figures, dataset card and category overview."""
