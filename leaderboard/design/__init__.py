"""What to ask next and how settled a board is: pairing policies, precision, fragility."""
