"""Where the sentence road cuts a streamed reply into pieces to speak (no gateway needed):
the turn's first clause on its own as soon as it is long enough to say, then sentences."""

from __future__ import annotations

import pytest

from herald.speech import split_sentences

pytestmark = pytest.mark.any_line


def test_the_first_clause_is_said_before_its_sentence_ends() -> None:
    text = "Well, the weather in Lisbon today is sunny, with a light breeze from the west"
    pieces, used = split_sentences(text, final=False, first_clause=True)
    assert pieces == ["Well, the weather in Lisbon today is sunny,"]
    assert text[used:] == "with a light breeze from the west"
    # Only the first: later text waits for its sentence to end.
    rest = text[used:] + ", and warm. Then"
    assert split_sentences(rest, final=False) == (["with a light breeze from the west, and warm."], len(rest) - 4)


def test_a_clause_that_ends_the_text_so_far_is_said_at_once_unless_a_number_may_go_on() -> None:
    text = "Here is the forecast for today,"
    assert split_sentences(text, final=False, first_clause=True) == ([text], len(text))
    text = "The forecast for tomorrow looks good —"
    assert split_sentences(text, final=False, first_clause=True) == ([text], len(text))
    # "1," may be the start of "1,000": the next word decides.
    assert split_sentences("The trip will cost about 1,", final=False, first_clause=True) == ([], 0)
    text = "The trip will cost about 1,000 euros, more or less"
    assert split_sentences(text, final=False, first_clause=True)[0] == ["The trip will cost about 1,000 euros,"]


def test_a_short_clause_or_a_sentence_that_ends_first_is_not_cut() -> None:
    # "Well," is too short to say alone: the first clause worth a pause comes later.
    assert split_sentences("Well, yes", final=False, first_clause=True) == ([], 0)
    text = "It is sunny today in Lisbon. Later, maybe some rain in the north"
    pieces, _ = split_sentences(text, final=False, first_clause=True)
    assert pieces == ["It is sunny today in Lisbon."]
    # A dash between words is a clause's end; one inside a word is not.
    text = "The forecast for tomorrow looks good — clear skies"
    assert split_sentences(text, final=False, first_clause=True)[0] == ["The forecast for tomorrow looks good —"]
    assert split_sentences("A well-known fact about the sea-level", final=False, first_clause=True) == ([], 0)


def test_without_first_clause_only_sentences_are_cut() -> None:
    text = "Well, the weather in Lisbon today is sunny, with a light breeze"
    assert split_sentences(text, final=False) == ([], 0)
    assert split_sentences(text, final=True) == ([text], len(text))
