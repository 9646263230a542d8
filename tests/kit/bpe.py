"""A small real tokenizer for tests: a byte-level BPE trained here with the `tokenizers` library.

It has the format of every Hugging Face `tokenizer.json`, so the dataset and token-count tests pin a
real tokenizer without downloading one. Training is deterministic and takes milliseconds.
"""

from __future__ import annotations

from functools import cache

CORPUS = [
    "The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill.",
    "Benchmarks measure what a device does; a figure without its formula cannot be compared.",
    "Servers batch several tokens per chunk, and speculative decoding breaks chunk equals token.",
    "Numbers 0123456789, punctuation (like this!), and symbols #@%& keep the vocabulary varied.",
] * 20


@cache
def tokenizer_json() -> bytes:
    """The tokenizer.json bytes of a 400-token byte-level BPE trained on `CORPUS` (the calling test
    skips where `tokenizers`, the llm extra, is not installed)."""
    from kit.extras import module

    module("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer.to_str().encode()
