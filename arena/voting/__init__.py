"""Blind battles: which two answers next, the pairing catalog's cache, issuing and voting, live battles.

Also the app's shared state (:class:`arena.voting.service.state.ArenaState`), which the routes and the voting
service both hold.
"""
