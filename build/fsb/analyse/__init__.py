"""The paper's analyses of a built dataset: the score histogram, seed and prompt type by bin, distinctive words
and n-grams per bin, as figures and a report.
"""
