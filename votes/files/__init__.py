"""Files without a database: rows read and checked, the source formats, columns, batches, writers.

Everything here works on a path and its rows alone, so `arena convert`, `arena recompute FILE` and the import
read a file the same way; nothing opens the store.
"""
