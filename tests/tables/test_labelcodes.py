"""The label coding of `fsb.tables.labelcodes`: short labels packed into integer keys, and best/worst coded by comparison with
the row's items, give the codes and the label order a plain dictionary of every cell gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fsb.tables.labelcodes import encode_cells, label_words, sorted_labels, widest, word_keys, words_order, words_to_labels

LABELS = ["b", "ab", "a", "abcdefgh", "é", "ü", "z" * 8, "", "a b", "0", "00", "é" * 4]


def test_one_word_keys_are_one_to_one_and_sort_as_python_sorts() -> None:
    """Distinct labels of up to 8 bytes (prefixes of each other, non-ASCII, empty) get distinct one-word keys
    that decode back to the label, and `sorted_labels` sorts them in Python's (code point) order."""
    words = np.concatenate([label_words(pa.array(LABELS[:5]), 1), label_words(pa.array(LABELS[5:]), 1)])
    assert np.unique(words[:, 0]).size == len(LABELS)
    assert words_to_labels(words).tolist() == LABELS
    labels, rank = sorted_labels(words)
    assert labels.tolist() == sorted(LABELS) and labels[rank].tolist() == LABELS
    ascii_labels = [x for x in LABELS if x.isascii()]
    assert words_to_labels(label_words(pa.array(ascii_labels), 1), ascii_only=True).tolist() == ascii_labels


def test_the_widest_label_decides_whether_one_word_holds_it() -> None:
    """A 9-byte label (or 5 two-byte characters) cannot be one uint64: `widest` says so in bytes."""
    assert widest(pa.array(["a", "abcdefghi"])) == 9
    assert widest(pa.array(["ééééé"])) == 10 and widest(pa.array(["ab", ""])) == 2


def test_encode_cells_matches_a_dictionary_of_every_cell() -> None:
    """Best and worst coded through the row's items (and the odd one equal to none of them, e.g. a bad
    row) get the code of their label, over chunks of different sizes."""
    rng = np.random.default_rng(3)
    values = rng.integers(0, 50, size=(6, 40)).astype(np.int64) * 7919
    values[4] = values[rng.integers(0, 4, size=40), np.arange(40)]  # best: one of the row's items
    values[5] = values[rng.integers(0, 4, size=40), np.arange(40)]
    values[4, [3, 17]] = -5  # equal to none of the row's items
    values[5, 30] = 10**12
    chunks = [[row[:13], row[13:]] for row in values]
    cells, dictionary, unmatched = encode_cells(chunks, 4)
    assert unmatched == 3
    assert cells.shape == (6, 40) and cells.dtype == np.int32
    np.testing.assert_array_equal(dictionary[cells], values)
    assert np.unique(dictionary).size == dictionary.size  # one code per label
    values[4, [3, 17]], values[5, 30] = values[0, [3, 17]], values[1, 30]
    assert encode_cells([[row] for row in values], 4)[2] == 0  # all among the items: the reader skips that check


def test_fixed_width_labels_read_as_strided_words_match_byte_by_byte_packing() -> None:
    """Labels of one length (the common fixed-format id) are read as one word from 8-byte windows with the bytes
    past the label masked off, up to the buffer's end. Every
    key must be the label's bytes as a little-endian number, for widths 1 to 8 and a sliced chunk."""
    rng = np.random.default_rng(5)
    for width in range(1, 9):
        labels = ["".join(chr(c) for c in rng.integers(33, 127, size=width)) for _ in range(50)]
        for chunk in (pa.array(labels), pa.array(labels).slice(7, 30)):
            words = label_words(chunk, 1)
            expected = [int.from_bytes(x.encode(), "little") for x in chunk.to_pylist()]
            assert words[:, 0].tolist() == expected, width
            assert words_to_labels(words, ascii_only=True).tolist() == chunk.to_pylist()


# --- labels over 8 bytes: words and keys -----------------------------------------------------------------

LONG = ["abcdefghi", "abcdefgh", "abcdefghij", "é" * 7, "comment_00001", "comment_00002", "x" * 40, "", "a", "ü-ü-ü-ü-ü"]


def test_label_words_give_back_each_label_and_sort_it_as_python_sorts() -> None:
    """Words of variable-width, one-width and sliced arrays (an offset into the buffers) decode back to their
    labels, and `words_order` sorts labels that share their first 8 bytes by all of them."""
    for labels, m in ((LONG, 5), ([f"{i:016x}" for i in range(30, 0, -1)], 2), (LONG, 7)):
        array = pa.array(["zz-not-this-one", *labels])[1:]  # a slice: offsets do not start at 0
        words = label_words(array, m)
        assert words.shape == (len(labels), m)
        assert words_to_labels(words).tolist() == labels
        assert [labels[i] for i in words_order(words)] == sorted(labels)


def test_word_keys_match_for_equal_labels_whatever_the_width_and_pack_short_ones() -> None:
    """A label's key does not depend on how many words its block needed (blocks are coded apart), a label of
    <= 8 bytes keys as its bytes read as one little-endian word, and these distinct labels get distinct keys."""
    array = pa.array(LONG)
    narrow, wide = word_keys(label_words(array, 5)), word_keys(label_words(array, 9))
    assert np.array_equal(narrow, wide)
    assert np.unique(narrow).size == len(LONG)
    short = [i for i, label in enumerate(LONG) if len(label.encode()) <= 8]
    packed = [int.from_bytes(LONG[i].encode(), "little") for i in short]
    assert narrow[short].tolist() == packed
