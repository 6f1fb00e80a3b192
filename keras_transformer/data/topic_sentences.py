"""Sentences of a small grammar whose words depend on each other: text a masked LM can learn from.

A fixed lexicon holds `num_topics` latent topics, each with its own content words (pseudo-words
made of consonant-vowel syllables: nouns, verbs and adjectives), and a few function words all
topics share. A sentence picks a topic and fills one of `TEMPLATES` ("the ADJ NOUN VERB the
NOUN", ...) with that topic's words; with probability `noise_rate` each content word is replaced
by a word of the same part of speech from another topic, so the text is not perfectly clean.

What that gives a masked language model: a hidden content word can be predicted from the others,
which show the topic (and from the template, which shows its part of speech), so pre-training
learns which words go together. The class of a sentence is its topic; with few labelled
sentences most held-out sentences are made of words the labelled set never showed, which a
model has to know from elsewhere, e.g. from pre-training on unlabelled sentences.

Splits: a sentence belongs to one split only, decided by a stable hash (`zlib.crc32`) of its text
(about 80% train, 10% validation, 10% test), so no validation or test sentence occurs in train.
Deterministic: the lexicon depends only on `num_topics` and `words_per_topic`; the sentences on
the split, size, seed and those. NumPy and the standard library only, no TensorFlow.
"""

import dataclasses
import zlib

import numpy as np

from keras_transformer.checks import check_choice, check_int, check_rate

__all__ = ["FUNCTION_WORDS", "TEMPLATES", "TOPIC_SPLITS", "TopicSentences", "topic_lexicon", "topic_sentences"]

TOPIC_SPLITS = ("train", "validation", "test")
# The words every topic shares; the content words are made of syllables and never equal one.
FUNCTION_WORDS = ("the", "a", "and", "near", "every", "some", "under", "this", "that", "with", "together")
# A sentence's frame: function words and slots, each slot filled with a content word of its part of speech.
TEMPLATES = (
    "the {adjective} {noun} {verb} the {noun}",
    "a {noun} {verb} near the {adjective} {noun}",
    "the {noun} and the {noun} {verb} together",
    "every {adjective} {noun} {verb} a {noun} with some {noun}",
    "{noun} {verb} under the {adjective} {adjective} {noun}",
    "this {noun} {verb} that {adjective} {noun}",
)
PARTS_OF_SPEECH = ("noun", "verb", "adjective")
_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"
_LEXICON_SEED = 2018  # the lexicon is fixed: every seed and split speaks the same language
_SPLIT_BUCKETS = {"test": (0,), "validation": (1,), "train": tuple(range(2, 10))}  # crc32 % 10


@dataclasses.dataclass
class TopicSentences:
    """Sentences of the topic grammar, each with its topic as class.

    Attributes:
        texts: list of `str`, the sentences, words separated by single spaces.
        labels: list of `int`, the topic of each: an index into `classes`.
        classes: tuple of `str`, the class names ("topic 0", ...).
    """

    texts: list
    labels: list
    classes: tuple

    def __len__(self):
        return len(self.texts)


def _parts_sizes(words_per_topic):
    """`{part of speech: words of it per topic}`: half nouns, a quarter verbs, the rest adjectives."""
    nouns = words_per_topic // 2
    verbs = (words_per_topic - nouns) // 2
    return {"noun": nouns, "verb": verbs, "adjective": words_per_topic - nouns - verbs}


def topic_lexicon(num_topics=8, words_per_topic=60):
    """The content words of each topic, by part of speech.

    Words are 2 or 3 consonant-vowel syllables ("tavo", "kemiru"), all distinct, none a function
    word; the same arguments always give the same lexicon.

    Args:
        num_topics: K, the number of topics (classes), at least 2.
        words_per_topic: content words per topic, at least 4 (half of them nouns, a quarter
            verbs, the rest adjectives).

    Returns:
        tuple of K dicts `{part of speech: tuple of str}`, one per topic.

    Raises:
        ValueError: a size is not an int or is too small.
    """
    num_topics = check_int("num_topics", num_topics, 2)
    words_per_topic = check_int("words_per_topic", words_per_topic, 4)
    rng = np.random.default_rng(_LEXICON_SEED)
    needed, words, seen = num_topics * words_per_topic, [], set(FUNCTION_WORDS)
    while len(words) < needed:
        syllables = rng.integers(2, 4)
        word = "".join(
            _CONSONANTS[rng.integers(len(_CONSONANTS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    sizes, lexicon, start = _parts_sizes(words_per_topic), [], 0
    for _ in range(num_topics):
        topic = {}
        for part in PARTS_OF_SPEECH:
            topic[part] = tuple(words[start : start + sizes[part]])
            start += sizes[part]
        lexicon.append(topic)
    return tuple(lexicon)


def _sentence(rng, lexicon, topic, noise_rate):
    """One sentence of `topic`: a template's slots filled with its words, some swapped for another topic's."""
    words = []
    for token in TEMPLATES[rng.integers(len(TEMPLATES))].split():
        if not token.startswith("{"):
            words.append(token)
            continue
        source = topic
        if noise_rate and rng.random() < noise_rate:  # a word of another topic: one of the K - 1 others
            source = (topic + 1 + rng.integers(len(lexicon) - 1)) % len(lexicon)
        choices = lexicon[source][token[1:-1]]
        words.append(choices[rng.integers(len(choices))])
    return " ".join(words)


def topic_sentences(split, size, seed=0, num_topics=8, words_per_topic=60, noise_rate=0.1):
    """Sentences of the topic grammar, labelled with their topic.

    Topics are drawn uniformly, then a template uniformly, then each slot's word uniformly among
    the topic's words of that part of speech (or, with probability `noise_rate`, among another
    topic's, the other topic uniform among the K - 1).

    Args:
        split: "train", "validation" or "test"; no sentence of one split occurs in another.
        size: N, the number of sentences.
        seed: the sampling seed (the lexicon does not depend on it).
        num_topics: K, the number of topics and classes.
        words_per_topic: content words per topic (`topic_lexicon`).
        noise_rate: probability in [0, 1) that a content word comes from another topic.

    Returns:
        `TopicSentences` of N sentences; a smaller `size` gives a prefix of a larger one.

    Raises:
        ValueError: an unknown split, or a size, seed or rate out of range.
    """
    check_choice("split", split, TOPIC_SPLITS)
    size = check_int("size", size, 0)
    seed = check_int("seed", seed, 0)
    noise_rate = check_rate("noise_rate", noise_rate)
    lexicon = topic_lexicon(num_topics, words_per_topic)
    rng = np.random.default_rng([seed, TOPIC_SPLITS.index(split)])
    buckets, texts, labels = _SPLIT_BUCKETS[split], [], []
    while len(texts) < size:
        topic = int(rng.integers(len(lexicon)))
        text = _sentence(rng, lexicon, topic, noise_rate)
        if zlib.crc32(text.encode()) % 10 in buckets:
            texts.append(text)
            labels.append(topic)
    return TopicSentences(texts=texts, labels=labels, classes=tuple(f"topic {k}" for k in range(len(lexicon))))
