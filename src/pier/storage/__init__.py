"""Where run outputs live: a local folder today, object storage later."""

from pier.storage.files import content_type, describe
from pier.storage.local import LocalStorage, Upload, check_name

__all__ = ["LocalStorage", "Upload", "check_name", "content_type", "describe"]
