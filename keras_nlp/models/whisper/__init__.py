"""Whisper."""

from keras_nlp.models.whisper.whisper_backbone import WhisperBackbone

__all__ = ["WhisperBackbone"]
