"""The topic grammar: deterministic, disjoint splits, labels that are the topic, words the topic predicts."""

import collections

import numpy as np
import pytest

from keras_transformer.data.topic_sentences import (
    FUNCTION_WORDS,
    TEMPLATES,
    TOPIC_SPLITS,
    topic_lexicon,
    topic_sentences,
)


def topic_of_word(lexicon):
    """`{content word: its topic}`."""
    return {word: k for k, topic in enumerate(lexicon) for words in topic.values() for word in words}


def test_the_same_arguments_give_the_same_sentences_and_a_smaller_size_a_prefix():
    first, again = topic_sentences("train", 300, seed=4), topic_sentences("train", 300, seed=4)
    assert first == again
    prefix = topic_sentences("train", 120, seed=4)
    assert prefix.texts == first.texts[:120] and prefix.labels == first.labels[:120]
    assert topic_sentences("train", 300, seed=5).texts != first.texts
    assert topic_lexicon(8, 60) == topic_lexicon(8, 60)


def test_no_sentence_is_in_two_splits():
    texts = {split: set(topic_sentences(split, 2000, seed=0, noise_rate=0.0).texts) for split in TOPIC_SPLITS}
    assert not texts["train"] & texts["validation"]
    assert not texts["train"] & texts["test"]
    assert not texts["validation"] & texts["test"]


def test_the_lexicon_gives_each_topic_its_own_words():
    lexicon = topic_lexicon(num_topics=5, words_per_topic=12)
    assert len(lexicon) == 5
    assert all({part: len(words) for part, words in topic.items()} == {"noun": 6, "verb": 3, "adjective": 3}
               for topic in lexicon)  # fmt: skip
    words = [word for topic in lexicon for part in topic.values() for word in part]
    assert len(set(words)) == len(words) == 60 and not set(words) & set(FUNCTION_WORDS)


def test_without_noise_every_content_word_comes_from_the_sentences_topic():
    lexicon, data = topic_lexicon(), topic_sentences("validation", 500, seed=1, noise_rate=0.0)
    owner = topic_of_word(lexicon)
    assert data.classes == tuple(f"topic {k}" for k in range(8))
    for text, label in zip(data.texts, data.labels, strict=True):
        content = [word for word in text.split() if word not in FUNCTION_WORDS]
        assert content and all(owner[word] == label for word in content), text
    # Every template is used, and each sentence is one of them with its slots filled.
    frames = collections.Counter(
        " ".join(word if word in FUNCTION_WORDS else "_" for word in text.split()) for text in data.texts
    )
    expected = {" ".join("_" if token.startswith("{") else token for token in t.split()) for t in TEMPLATES}
    assert set(frames) == expected


def test_noise_swaps_about_the_stated_share_of_content_words_for_another_topics():
    owner = topic_of_word(topic_lexicon())
    data = topic_sentences("train", 3000, seed=2, noise_rate=0.2)
    off, total = 0, 0
    for text, label in zip(data.texts, data.labels, strict=True):
        content = [word for word in text.split() if word not in FUNCTION_WORDS]
        off += sum(owner[word] != label for word in content)
        total += len(content)
    assert abs(off / total - 0.2) < 0.02  # about 13,000 words: a standard error of 0.0035
    assert np.bincount(data.labels).min() > 300  # the 8 topics about equally often


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(split="dev", size=3), "`split` must be one of .*Received: split='dev'"),
        (dict(split="train", size=-1), "`size` must be an int >= 0. Received: size=-1"),
        (dict(split="train", size=3, seed=1.5), "`seed` must be an int >= 0. Received: seed=1.5"),
        (dict(split="train", size=3, num_topics=1), "`num_topics` must be an int >= 2. Received: num_topics=1"),
        (dict(split="train", size=3, words_per_topic=3), "`words_per_topic` must be an int >= 4. Received: .*=3"),
        (dict(split="train", size=3, noise_rate=1.0), r"`noise_rate` must be a number in \[0, 1\). Received: .*=1.0"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(arguments, message):
    with pytest.raises(ValueError, match=message):
        topic_sentences(**arguments)
