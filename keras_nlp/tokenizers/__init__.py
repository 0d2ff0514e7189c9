"""Text in and out of the tasks: a preset's tokenizer and preprocessors.

`Tokenizer` reads a Hugging Face `tokenizer.json` or a SentencePiece
`tokenizer.model` (with the special tokens of the files beside it);
`TextPreprocessor` pads batches of prompts (left) and training text
(right) and decodes generated ids; `ClassifierPreprocessor` packs one or
two text columns into a text classifier's inputs. All run on the host,
never traced.
"""

from keras_nlp.tokenizers.classifier_preprocessor import ClassifierPreprocessor
from keras_nlp.tokenizers.text_preprocessor import TextPreprocessor
from keras_nlp.tokenizers.tokenizer import Tokenizer
from keras_nlp.tokenizers.tokenizer import find_tokenizer
from keras_nlp.tokenizers.tokenizer_files import TOKENIZER_FILES

__all__ = [
    "ClassifierPreprocessor",
    "TOKENIZER_FILES",
    "TextPreprocessor",
    "Tokenizer",
    "find_tokenizer",
]
