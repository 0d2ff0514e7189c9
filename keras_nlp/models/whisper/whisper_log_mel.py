"""Whisper's audio front end: log-mel spectrograms in NumPy.

Host code, as Whisper's feature extractor: a short-time Fourier transform
with a 400-sample periodic Hann window every 160 samples (25 ms and 10 ms
at 16 kHz), its power through a bank of triangular mel filters on the
Slaney mel scale (linear below 1 kHz, logarithmic above) each normalized
to unit area, then log10, clamped to 8 below each example's maximum and
scaled by `(x + 4) / 4`.
"""

import numpy as np

# 30 seconds at 16 kHz: the frames one Whisper window takes.
WHISPER_FRAMES = 3000

# The Slaney mel scale: 3 mels per 200 Hz up to 1 kHz (15 mels), then
# 27 mels per factor 6.4 of frequency.
_LINEAR_HZ_PER_MEL = 200.0 / 3.0
_BREAK_HZ = 1000.0
_BREAK_MEL = _BREAK_HZ / _LINEAR_HZ_PER_MEL
_LOG_STEP = np.log(6.4) / 27.0


def hz_to_mel(frequencies):
    """Slaney mels of frequencies in Hz (float64 NumPy)."""
    frequencies = np.asarray(frequencies, "float64")
    linear = frequencies / _LINEAR_HZ_PER_MEL
    above = frequencies >= _BREAK_HZ
    logarithmic = (
        _BREAK_MEL
        + np.log(np.maximum(frequencies, _BREAK_HZ) / _BREAK_HZ) / _LOG_STEP
    )
    return np.where(above, logarithmic, linear)


def mel_to_hz(mels):
    """Frequencies in Hz of Slaney mels (float64 NumPy)."""
    mels = np.asarray(mels, "float64")
    linear = mels * _LINEAR_HZ_PER_MEL
    logarithmic = _BREAK_HZ * np.exp(_LOG_STEP * (mels - _BREAK_MEL))
    return np.where(mels >= _BREAK_MEL, logarithmic, linear)


def mel_filters(sampling_rate=16000, num_fft=400, num_mels=80):
    """Triangular mel filters `(num_mels, num_fft // 2 + 1)`, float64.

    Filter `i` rises from the `i`-th of `num_mels + 2` frequencies evenly
    spaced in mels from 0 Hz to Nyquist, peaks at the next, and falls to
    zero at the one after; each is scaled by `2 / (its base width in Hz)`
    so that its area is one (as librosa's `filters.mel` with `norm="slaney"`,
    whose output Whisper publishes for 80 and 128 mels).

    Args:
        sampling_rate: int, samples per second.
        num_fft: int, the FFT length (the window's).
        num_mels: int, filters.

    Returns:
        float64 NumPy array `(num_mels, num_fft // 2 + 1)`.
    """
    bin_hz = np.linspace(0.0, sampling_rate / 2, num_fft // 2 + 1)
    edges = mel_to_hz(
        np.linspace(0.0, hz_to_mel(sampling_rate / 2), num_mels + 2)
    )
    lower, center, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bin_hz - lower) / (center - lower)
    falling = (upper - bin_hz) / (upper - center)
    triangles = np.maximum(0.0, np.minimum(rising, falling))
    return triangles * (2.0 / (upper - lower))


def _power_spectrogram(audio, num_fft, hop_length):
    """`|STFT|^2` `(batch, frames, num_fft // 2 + 1)` of `(batch,
    samples)`: centred frames (reflect padding), the last one dropped as
    Whisper does, so `samples // hop_length` frames."""
    padded = np.pad(
        audio, ((0, 0), (num_fft // 2, num_fft // 2)), mode="reflect"
    )
    num_frames = audio.shape[1] // hop_length
    starts = hop_length * np.arange(num_frames)
    frames = padded[:, starts[:, None] + np.arange(num_fft)[None, :]]
    # Periodic Hann (the window of `torch.hann_window`).
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(num_fft) / num_fft)
    return np.abs(np.fft.rfft(frames * window, axis=-1)) ** 2


def log_mel_spectrogram(
    audio,
    sampling_rate=16000,
    num_mels=80,
    num_fft=400,
    hop_length=160,
    num_frames=None,
):
    """Whisper's input features of raw audio: scaled log-mel frames.

    Args:
        audio: float array `(samples,)` or `(batch, samples)`, mono, at
            `sampling_rate`, in [-1, 1].
        sampling_rate: int. Defaults to `16000`, Whisper's.
        num_mels: int, mel bins per frame: `80`, or `128` for
            large-v3. Defaults to `80`.
        num_fft: int, the window and FFT length. Defaults to `400`.
        hop_length: int, samples between frames. Defaults to `160`.
        num_frames: optional int: the audio is zero-padded or trimmed to
            `num_frames * hop_length` samples first, as Whisper's feature
            extractor does to 30 s (`WHISPER_FRAMES`, 3000). `None` keeps
            `samples // hop_length` frames.

    Returns:
        float32 NumPy array `(frames, num_mels)`, or `(batch, frames,
        num_mels)` for batched audio: `(max(log10(mel power), max - 8) +
        4) / 4`, the maximum taken per example.

    Example:

    ```python
    import numpy as np
    from keras_nlp.models.whisper import log_mel_spectrogram

    time = np.arange(16000) / 16000
    features = log_mel_spectrogram(np.sin(2 * np.pi * 440 * time))
    features.shape  # (100, 80)
    ```
    """
    audio = np.asarray(audio, "float64")
    if audio.ndim not in (1, 2):
        raise ValueError(
            "`audio` must be `(samples,)` or `(batch, samples)`. Received "
            f"shape: {audio.shape}."
        )
    batched = audio.ndim == 2
    audio = audio if batched else audio[None]
    if num_frames is not None:
        samples = num_frames * hop_length
        audio = audio[:, :samples]
        audio = np.pad(audio, ((0, 0), (0, samples - audio.shape[1])))
    if audio.shape[1] <= num_fft // 2:
        raise ValueError(
            f"`audio` needs more than {num_fft // 2} samples (half a "
            f"window) to frame. Received {audio.shape[1]}."
        )
    power = _power_spectrogram(audio, num_fft, hop_length)
    mel = power @ mel_filters(sampling_rate, num_fft, num_mels).T
    log_mel = np.log10(np.maximum(mel, 1e-10))
    peak = log_mel.max(axis=(1, 2), keepdims=True)
    log_mel = (np.maximum(log_mel, peak - 8.0) + 4.0) / 4.0
    log_mel = log_mel.astype("float32")
    return log_mel if batched else log_mel[0]
