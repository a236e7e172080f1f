"""Generating graded gender-biased text: seed curation, the paper's prompts and in-context examples, the
generation plan, explanations of scores, and the word lists that mark sentences.
"""
