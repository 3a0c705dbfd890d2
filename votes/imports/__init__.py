"""Files into the store, all or nothing: import runs and the machinery that stages and merges them.

The public entry point is :func:`votes.imports.files.import_file`; the demo's data comes in the same way.
"""
