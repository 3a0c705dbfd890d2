"""Who to trust: annotator and voter review, gold, skip asymmetry, judges' position and ability.

Imports the Bradley-Terry room below it; nothing here fits a board of its own.
"""
