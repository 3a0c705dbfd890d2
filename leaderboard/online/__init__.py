"""Online raters, one vote at a time: Elo, Glicko-2 and TrueSkill.

The shared base class and replay loop (raters), Elo with the chess federations' K schedules, Glicko-2 and
TrueSkill, and the RATERS table (table) that names each one for the settings, the pairing and evaluate.
The live standings use one of them inside the vote transaction.
"""
