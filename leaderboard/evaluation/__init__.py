"""Which rating system forecasts best: held-out votes, calibration, every system on one split.

Also the seeded simulation of battles from known ratings that tests, coverage studies and benchmarks share.
"""
