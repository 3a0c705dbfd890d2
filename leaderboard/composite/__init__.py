"""Humans and LLM judges on one scale: the composite fit and board, PPI, agreement statistics."""
