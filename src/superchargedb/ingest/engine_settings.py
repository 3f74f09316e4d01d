"""The media engines' limits and options, read from the settings (one place for the job
runner, the worker and the ingest-time cost estimate)."""

from __future__ import annotations

from typing import Any

from .derive_base import DeriveOptions, MediaLimits


def media_limits(settings: Any) -> MediaLimits:
    s = settings
    return MediaLimits(
        max_pages=s.media_max_pages,
        max_pixels=s.media_max_pixels,
        max_duration_s=s.media_max_duration_s,
        timeout_s=s.media_timeout_s,
        memory_mb=s.media_memory_mb,
    )


def options_from(settings: Any) -> DeriveOptions:
    """Engine options from the settings (threads, ASR model, an optional HTTP captioner)."""
    captioner = None
    if settings.captioner_url:
        from .derive_ocr import HttpCaptioner

        captioner = HttpCaptioner(
            settings.captioner_url, settings.captioner_model, settings.captioner_api_key
        )
    return DeriveOptions(
        threads=settings.media_threads, asr_model=settings.asr_model, captioner=captioner
    )
