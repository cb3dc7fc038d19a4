"""Sentence-bounded chunking with spaCy."""

from __future__ import annotations

from metakg.text_processing import chunk_text, concept_phrases


def test_chunks_hold_whole_sentences_and_lose_nothing() -> None:
    sentences = [f"Sentence number {i} says that aspirin treats pain." for i in range(40)]
    text = " ".join(sentences)
    chunks = chunk_text(text, max_chars=200)
    assert len(chunks) > 5
    assert all(len(c.text) <= 200 for c in chunks)
    assert " ".join(c.text for c in chunks) == text  # every sentence, in order
    assert all(c.text.endswith(".") for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_a_sentence_longer_than_the_limit_is_its_own_chunk() -> None:
    long_sentence = "word " * 100 + "end."
    chunks = chunk_text(f"Short one. {long_sentence} Another short one.", max_chars=50)
    assert [c.text for c in chunks] == ["Short one.", long_sentence.strip(), "Another short one."]


def test_empty_and_unicode_text() -> None:
    assert chunk_text("   ") == []
    chunks = chunk_text("東京は日本の首都です。 Tokyo is the capital of Japan.", max_chars=1000)
    assert len(chunks) == 1 and "東京" in chunks[0].text


def test_concept_phrases_keep_hyphenated_words_whole() -> None:
    assert concept_phrases("who were the co-stars of Kiefer Sutherland") == ["co-stars", "Kiefer Sutherland"]
    assert concept_phrases("an x-ray of the left-hand knee") == ["x-ray", "left-hand knee"]
    assert concept_phrases("aspirin - a drug") == ["aspirin", "drug"]  # a dash with spaces around separates
