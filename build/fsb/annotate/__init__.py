"""Comparative annotation: annotators' forms and their answers, Label Studio projects and exports, and a model as
a best-worst annotator.
"""
