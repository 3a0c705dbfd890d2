"""The Bradley-Terry family: one engine behind every batch method.

What a board is asked for (request: the METHODS table, model options, the one FitRequest) and what a fit
is asked for (spec), the cells and their optimisers (cells, newton, probit, fit), the package's one Newton
trust-region driver (solver, which the composite, rater-ability and PPI++ fits use too), intervals, the
bootstrap, cluster structure, pairwise matrices and the board it all fills (compute). Imports only the core
types of the package.
"""
