"""Whisper."""

from keras_nlp.models.whisper.whisper_backbone import WhisperBackbone
from keras_nlp.models.whisper.whisper_log_mel import WHISPER_FRAMES
from keras_nlp.models.whisper.whisper_log_mel import log_mel_spectrogram
from keras_nlp.models.whisper.whisper_log_mel import mel_filters

__all__ = [
    "WHISPER_FRAMES",
    "WhisperBackbone",
    "log_mel_spectrogram",
    "mel_filters",
]
