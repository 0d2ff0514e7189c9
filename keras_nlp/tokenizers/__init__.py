"""Text in and out of causal LMs: a preset's tokenizer and a preprocessor.

`Tokenizer` reads a Hugging Face `tokenizer.json` or a SentencePiece
`tokenizer.model` (with the special tokens of the files beside it);
`TextPreprocessor` pads batches of prompts (left) and training text
(right) and decodes generated ids. Both run on the host, never traced.
"""

from keras_nlp.tokenizers.text_preprocessor import TextPreprocessor
from keras_nlp.tokenizers.tokenizer import Tokenizer
from keras_nlp.tokenizers.tokenizer import find_tokenizer
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_FILES

__all__ = [
    "TOKENIZER_FILES",
    "TextPreprocessor",
    "Tokenizer",
    "find_tokenizer",
]
