"""The vote transaction with its live rating: battles in flight, the writers, gold and repeat votes.

Also the annotators the site knows, live battles, and what the voting pages read.
"""
