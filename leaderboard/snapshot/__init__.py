"""A snapshot folder: its files, written and read back, diffed; the FIGURES table with the drawers, their
layout and rendering; the dataset card and the category overview."""
