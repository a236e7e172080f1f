"""Seeds: word-list marks, curation from COPA and StereoSet, reading seed files (the release's as they are)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import fifty_shades_of_bias as spec
from fsb.core.readers import InputError, sha256_file
from fsb.generate.keys import normalize
from fsb.generate.marks import Marker, load_wordlist
from fsb.generate.seeds import (
    DEFAULT_COUNTS,
    Seed,
    SourceSentence,
    curate,
    ranked_draw,
    read_copa,
    read_seeds,
    read_stereoset,
    seed_type_from_name,
)
from tests._support import run_fsb

SOURCES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "seed-sources"  # ../shared beside the checkout
COPA = SOURCES / "balacopa-dev-all.xml"
STEREOSET = SOURCES / "editbias_gender_test.json"


def fsb(*args: str) -> subprocess.CompletedProcess[str]:
    return run_fsb(*args)


@pytest.fixture(scope="module")
def marker() -> Marker:
    return Marker()


@pytest.fixture(scope="module")
def curated() -> tuple[list[Seed], dict]:
    return curate(COPA, STEREOSET, seed=0)


# --- word lists and marks ----------------------------------------------------------------------------


def test_word_lists_are_well_formed_and_disjoint(marker: Marker) -> None:
    assert "her" in marker.gendered.words and "schoolgirl" in marker.gendered.words
    assert "driver" in marker.person.words and "i" in marker.person.words
    assert not marker.gendered.words & marker.person.words  # a word marks one thing only
    assert "my" not in marker.person.words  # "my computer crashed" is about the computer
    assert len(marker.gendered.sha256) == 64


@pytest.mark.parametrize(
    ("text", "category", "gender_words", "person_words"),
    [
        ("The driver honked her horn.", "gendered", ("her",), ("driver",)),
        ("The woman's bag was heavy.", "gendered", ("woman",), ()),  # possessive 's
        ("The woman\u2019s bag was heavy.", "gendered", ("woman",), ()),  # curly apostrophe
        ("The climbers failed to reach the peak.", "person", (), ("climbers",)),
        ("My foot went numb.", "person", (), ("foot",)),
        ("I drank from the water fountain.", "person", (), ("i",)),
        ("My computer crashed.", "none", (), ()),
        ("The cat chased the bird.", "none", (), ()),
        ("The mother-in-law SHE visited.", "gendered", ("mother", "she"), ()),
        ("Theory of mind", "person", (), ("mind",)),
        ("Hermes flew.", "none", (), ()),  # no partial-word matches: "her" is not in "hermes"
    ],
)
def test_marks(marker: Marker, text: str, category: str, gender_words: tuple[str, ...], person_words: tuple[str, ...]) -> None:
    m = marker.mark(text)
    assert m.category() == category
    assert m.gender_words == gender_words
    assert m.person_words == person_words


def test_a_users_word_list_replaces_the_projects(tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("# my list\nbird   # birds are people too\n\ncat\n", encoding="utf-8")
    marker = Marker(load_wordlist(words))
    assert marker.mark("The cat chased the bird.").gender_words == ("cat", "bird")
    assert not marker.mark("She left.").gendered
    (tmp_path / "bad.txt").write_text("two words\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_wordlist(tmp_path / "bad.txt")
    assert e.value.line == 1


def test_marks_agree_with_the_release_seeds(marker: Marker, release: Path) -> None:
    """The release's curators chose implicit seeds about people and neutral seeds about things; the word
    lists (tuned with these files in view, so this is agreement, not a held-out score) mostly agree."""
    seeds, _ = read_seeds([str(release / "seeds")])
    implicit = [marker.mark(s.text).category() for s in seeds if s.seed_type == "implicit"]
    neutral = [marker.mark(s.text).category() for s in seeds if s.seed_type == "neutral"]
    assert implicit.count("person") / len(implicit) >= 0.85  # 134 / 150 (5 of the others name a gender)
    assert neutral.count("none") / len(neutral) >= 0.95  # 145 / 150
    explicit = [marker.mark(s.text) for s in seeds if s.seed_type == "explicit"]
    assert all(m.gendered for m in explicit)


# --- curation -----------------------------------------------------------------------------------------


def test_curate_draws_the_papers_counts_with_provenance(curated: tuple[list[Seed], dict], marker: Marker) -> None:
    seeds, manifest = curated
    by_type = {t: [s for s in seeds if s.seed_type == t] for t in spec.SEED_TYPES}
    assert {t: len(v) for t, v in by_type.items()} == DEFAULT_COUNTS == {"explicit": 150, "implicit": 150, "neutral": 150, "random": 50}
    assert [s.seed_type for s in seeds] == sorted((s.seed_type for s in seeds), key=spec.SEED_TYPES.index)
    stereotypes = {s.text: s for s in read_stereoset(STEREOSET)}
    premises = {s.text: s for s in read_copa(COPA)}
    for s in by_type["explicit"]:
        assert s.source == "stereoset" and stereotypes[s.text].source_id == s.source_id
    for s in by_type["implicit"] + by_type["neutral"] + by_type["random"]:
        assert s.source == "copa" and premises[s.text].source_id == s.source_id
    assert all(marker.mark(s.text).category() == "person" for s in by_type["implicit"])
    assert all(marker.mark(s.text).category() == "none" for s in by_type["neutral"])
    keys = [normalize(s.text) for s in seeds]
    assert len(set(keys)) == len(keys)  # random never repeats an implicit or neutral seed
    random_marks = {marker.mark(s.text).category() for s in by_type["random"]}
    assert len(random_marks) > 1  # random seeds are drawn whatever they mention
    for s in seeds:
        assert s.extra["gendered"] == marker.mark(s.text).gendered
    assert manifest["pools"]["copa_premises"] == len(premises)
    assert manifest["sources"]["copa"]["sha256"] == sha256_file(COPA)
    assert manifest["gendered_words"]["sha256"] == marker.gendered.sha256


def test_curation_is_reproducible_and_depends_on_the_seed(curated: tuple[list[Seed], dict]) -> None:
    again, _ = curate(COPA, STEREOSET, seed=0)
    assert [s.text for s in again] == [s.text for s in curated[0]]
    other, _ = curate(COPA, STEREOSET, seed=1)
    assert {s.text for s in other} != {s.text for s in curated[0]}


def test_ranked_draw_is_stable_when_candidates_are_added() -> None:
    """Adding candidates can only displace chosen ones in favour of new ones: nothing old is reshuffled."""
    old = [SourceSentence(f"old sentence {i}", str(i)) for i in range(200)]
    new = [SourceSentence(f"new sentence {i}", f"n{i}") for i in range(50)]
    before = {s.text for s in ranked_draw(old, 30, 7, "implicit")}
    after = {s.text for s in ranked_draw(old + new, 30, 7, "implicit")}
    assert after - before <= {s.text for s in new}
    assert before - after  # some were displaced by new ones (else this test shows nothing)


def test_too_few_candidates_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="asked for 1000 implicit seeds"):
        curate(COPA, None, {"explicit": 0, "implicit": 1000})
    with pytest.raises(InputError, match="StereoSet"):
        curate(COPA, None, {"explicit": 5})


def test_fsb_seeds_cli_writes_the_same_bytes_twice_and_they_load(tmp_path: Path) -> None:
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name / "seeds.jsonl"
        proc = fsb("seeds", "--copa", str(COPA), "--stereoset", str(STEREOSET), "--out", str(out), "--seed", "3", "--random", "20")
        assert proc.returncode == 0, proc.stderr
        assert "wrote 470 seeds" in proc.stdout
        outs.append(out)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    manifest = json.loads((tmp_path / "a" / "seeds.manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["counts"]["random"] == 20
    assert (tmp_path / "a" / "seeds.manifest.json").read_bytes() == (tmp_path / "b" / "seeds.manifest.json").read_bytes()
    loaded, notes = read_seeds([str(outs[0])])
    assert len(loaded) == 470 and not notes
    first = json.loads(outs[0].read_text().splitlines()[0])
    assert first["seed_type"] == "explicit" and first["source"] == "stereoset" and first["gendered"] is True


def test_fsb_seeds_cli_refuses_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "seeds.jsonl"
    proc = fsb("seeds", "--copa", str(COPA), "--stereoset", str(STEREOSET), "--out", str(out), "--neutral", "5000")
    assert proc.returncode == 2
    assert "asked for 5000 neutral seeds" in proc.stderr
    assert not out.exists()


def test_fsb_seeds_mark_the_release_seeds(tmp_path: Path, release: Path) -> None:
    out = tmp_path / "marked.jsonl"
    proc = fsb("seeds", "--mark", str(release / "seeds"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 450
    assert {r["seed_type"] for r in rows} == {"explicit", "implicit", "neutral"}
    assert sum(r["person"] and not r["gendered"] for r in rows if r["seed_type"] == "implicit") == 134


# --- source formats -------------------------------------------------------------------------------------


def test_original_stereoset_format_gender_stereotypes_only(tmp_path: Path) -> None:
    def item(bias: str, context: str, sentences: list[tuple[str, str]], iid: str) -> dict:
        return {
            "id": iid,
            "target": "t",
            "bias_type": bias,
            "context": context,
            "sentences": [{"sentence": s, "id": f"{iid}-{label}", "gold_label": label} for s, label in sentences],
        }

    doc = {
        "version": "1.0-dev",
        "data": {
            "intrasentence": [
                item("gender", "Girls are BLANK.", [("Girls are weak.", "stereotype"), ("Girls are strong.", "anti-stereotype")], "a"),
                item("race", "X are BLANK.", [("X are bad.", "stereotype")], "b"),
            ],
            "intersentence": [
                item("gender", "My mother came home.", [("She cooked dinner.", "stereotype"), ("Cats fly.", "unrelated")], "c"),
            ],
        },
    }
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    got = read_stereoset(path)
    assert [(s.text, s.source_id, s.fields["part"]) for s in got] == [
        ("Girls are weak.", "a-stereotype", "intrasentence"),
        ("My mother came home. She cooked dinner.", "c-stereotype", "intersentence"),
    ]
    path.write_text(json.dumps({"data": {"intrasentence": [doc["data"]["intrasentence"][1]]}}), encoding="utf-8")
    with pytest.raises(InputError, match="no gender stereotype"):
        read_stereoset(path)


def test_copa_jsonl_and_bad_xml(tmp_path: Path) -> None:
    p = tmp_path / "copa.jsonl"
    records = [
        {"premise": "The man broke his toe.", "idx": 0},
        None,
        {"premise": "The man broke his toe.", "idx": 1},
        {"premise": "It rained.", "idx": 2},
    ]
    p.write_text("".join(json.dumps(r) + "\n" if r else "\n" for r in records))
    assert [(s.text, s.source_id) for s in read_copa(p)] == [("The man broke his toe.", "0"), ("It rained.", "2")]
    bad = tmp_path / "copa.xml"
    bad.write_text("<copa-corpus><item id='1'><p>Fine.</p></item>\n<item id='2'></copa-corpus>")
    with pytest.raises(InputError) as e:
        read_copa(bad)
    assert e.value.line == 2


# --- reading seed files -----------------------------------------------------------------------------------


def test_the_release_seed_files_load_as_they_are(release: Path) -> None:
    seeds, notes = read_seeds([str(release / "seeds")])
    assert [sum(s.seed_type == t for s in seeds) for t in ("explicit", "implicit", "neutral")] == [150, 150, 150]
    for name, seed_type in (("explict_bias_seed.txt", "explicit"), ("implicit_bias_seed.txt", "implicit")):
        lines = (release / "seeds" / name).read_bytes().decode("utf-8").split("\r\n")  # CRLF, no final line break
        assert [s.text for s in seeds if s.seed_type == seed_type] == lines  # verbatim, trailing spaces and all
    repeated = [s for s in seeds if s.occurrence]
    assert [(s.text, s.source_id, s.occurrence) for s in repeated] == [("I have a sister.", "85", 1)]
    assert notes == ["explict_bias_seed.txt: line 85 repeats line 12 ('I have a sister.'); kept, as the pinned release has it"]
    assert seeds[0].source == "fsb-release:seeds/explict_bias_seed.txt"


def test_a_changed_copy_of_a_release_file_is_an_ordinary_file(tmp_path: Path, release: Path) -> None:
    copy = tmp_path / "explict_bias_seed.txt"
    shutil.copy(release / "seeds" / "explict_bias_seed.txt", copy)
    with copy.open("ab") as f:
        f.write(b"\r\nOne more seed.")
    with pytest.raises(InputError) as e:
        read_seeds([str(copy)])
    assert e.value.line == 85 and "first on line 12" in str(e.value)


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("One.\n\nTwo.\n", 2, "blank line"),
        ("One.\n   \nTwo.\n", 2, "blank line"),
        ("One.\nTwo.\n  one. \n", 3, "duplicate seed (first on line 1)"),
        ("", None, "file is empty"),
    ],
)
def test_bad_seed_files(tmp_path: Path, content: str, line: int | None, message: str) -> None:
    p = tmp_path / "neutral.txt"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_seeds([str(p)])
    assert message in str(e.value)
    assert e.value.line == line


def test_seed_types_from_names_and_prefixes(tmp_path: Path) -> None:
    assert seed_type_from_name("explict_bias_seed.txt") == "explicit"
    assert seed_type_from_name("my-random-seeds.txt") == "random"
    assert seed_type_from_name("implicitly.txt") is None
    assert seed_type_from_name("implicit_or_neutral.txt") is None
    p = tmp_path / "mine.txt"
    p.write_text("A seed.\n", encoding="utf-8")
    with pytest.raises(InputError, match="TYPE=FILE"):
        read_seeds([str(p)])
    seeds, _ = read_seeds([f"random={p}"])
    assert seeds[0].seed_type == "random" and seeds[0].source_id == "1"
    dup = tmp_path / "random_two.txt"
    dup.write_text("a seed.\n", encoding="utf-8")
    with pytest.raises(InputError, match="duplicate random seed"):
        read_seeds([f"random={p}", str(dup)])
    assert len(read_seeds([f"random={p}", f"neutral={dup}"])[0]) == 2  # the same text under two types is fine


def test_bad_seed_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "seeds.jsonl"
    p.write_text('{"seed": "Fine.", "seed_type": "neutral"}\n{"seed": "Odd.", "seed_type": "sarcastic"}\n')
    with pytest.raises(InputError) as e:
        read_seeds([str(p)])
    assert (e.value.line, e.value.field) == (2, "seed_type")
    p.write_text('{"seed": "", "seed_type": "neutral"}\n')
    with pytest.raises(InputError, match="empty seed"):
        read_seeds([str(p)])
