"""Tiny tokenizers trained in the tests (no network, milliseconds).

`train_bpe_json`: a byte-level BPE `tokenizer.json` (round-trips any text) whose
post-processor starts every text with `<s>`. `train_sentencepiece`: a
unigram SentencePiece model in its default layout (unk 0, BOS 1, EOS 2, no
PAD). `train_gemma_layout_model`: one in Gemma's layout (PAD 0, EOS 1, BOS 2,
unk 3, with Gemma's piece names).
"""

import io
import json

TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "A tokenizer turns text into ids and back again.",
    "Keras runs the same model on many devices at once.",
    "Sharded generation should equal generation on one device.",
    "Every prompt is padded on the left, every answer on the right.",
    "Special tokens begin and end each sequence of text.",
    "Small models train quickly; large models need many chips.",
    "We measure tokens per second and bytes per device.",
]
# Texts made of the training text's characters, so that SentencePiece
# decodes them back exactly.
PLAIN = [
    "the lazy dog turns into a quick model",
    "many devices train the same tokens",
    "Keras",
]


def train_bpe_json():
    from tokenizers import Tokenizer
    from tokenizers import decoders
    from tokenizers import models
    from tokenizers import pre_tokenizers
    from tokenizers import processors
    from tokenizers import trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<s>", "</s>", "<|eot|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(TEXT, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        special_tokens=[("<s>", tokenizer.token_to_id("<s>"))],
    )
    return tokenizer.to_str().encode("utf-8")


def _train_sentencepiece(**options):
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXT),
        model_writer=model,
        vocab_size=64,
        hard_vocab_limit=False,
        character_coverage=1.0,
        minloglevel=2,
        **options,
    )
    return model.getvalue()


def train_sentencepiece(**options):
    return _train_sentencepiece(**options)


def train_gemma_layout_model():
    return _train_sentencepiece(
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        pad_piece="<pad>",
        eos_piece="<eos>",
        bos_piece="<bos>",
        unk_piece="<unk>",
    )


def write_files(directory, files):
    """Writes {name: bytes or JSON-able dict} into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in files.items():
        if not isinstance(value, bytes):
            value = json.dumps(value).encode("utf-8")
        (directory / name).write_bytes(value)
    return directory
