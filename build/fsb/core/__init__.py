"""The ground floor every stage stands on: errors, the readers that name file/line/field, validated tables and
the one id rule, a study's items, atomic writes and sealed folders, where the non-code folders are. Imports
nothing else of fsb.
"""
