"""The dataset stage: the upstream release, the build (tables -> scores -> a folder of Parquet, stats.json and
card), the human reference figures, the card, diffs between builds, and publishing to the Hub.
"""
