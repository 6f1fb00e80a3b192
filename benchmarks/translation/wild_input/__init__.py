"""The time of the costliest inputs a text export accepts, against a plain sentence, one text per call.

    python -m benchmarks.translation.wild_input --model saved_models/transformer    # an export (latest version)
    python -m benchmarks.translation.wild_input --model saved_models/transformer --repeats 3 --out /tmp/results
    python -m benchmarks.translation.wild_input --help                              # every flag

The export's `serving_default` reads the first `MAX_TEXT_BYTES` (64 KiB) of each text and
tokenizes only the first `max_source_len + 1` words, so no text costs more than a bounded time.
This measures that bound on a real export: each input below is sent alone, `--repeats` times
after one untimed call (the graph's set-up), and the report gives the fastest and the median call
and the median's ratio to the plain sentence's, the peer of every row:

- a plain date (`"march 21, 1987"`);
- 64 KiB of random bytes (invalid UTF-8 included);
- 64 KiB of one-letter words (the most words);
- 64 KiB of U+FDFA, which Unicode NFKC makes 11 times longer;
- 64 KiB of words of 1,023 bytes, just under `MAX_BYTES_PER_WORD`, the costliest input known:
  WordPiece tries every piece length at every position of such a word;
- 4 MiB of those words (only the first 64 KiB are read);
- `translate_ids` with 64 ids and with 1,000,000 ids (columns beyond `max_source_len` are only
  checked), when the export has that signature.

It prints the CPU model and its matrix-multiply flags, the table, and writes `--name`.json
(`wild_input.json`) in the `--out` folder (the study's `results/` by default: settings, CPU model
and flags, versions, every call's seconds).
"""
