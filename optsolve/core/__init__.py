"""Machinery shared by every solver: problem files, results, backends, errors, progress, batch runs.

Nothing in here knows about a particular optimisation problem.
"""
