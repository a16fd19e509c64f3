"""Where run outputs live: a local folder today, object storage later."""

from pier.storage.files import content_type, describe
from pier.storage.local import LocalStorage, Upload

__all__ = ["LocalStorage", "Upload", "content_type", "describe"]
