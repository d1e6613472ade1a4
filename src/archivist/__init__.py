"""archivist: long-term, speaker-attributed memory for LLM assistants.

Importing the package has no side effects: no model is loaded and no file is
opened until a Memory is constructed and used.
"""

from .config import Settings
from .errors import ArchivistError
from .model import Attachment, Conversation, Hit, Message, Session
from .service import Memory, MemoryService

__all__ = [
    "ArchivistError",
    "Attachment",
    "Conversation",
    "Hit",
    "Memory",
    "MemoryService",
    "Message",
    "Session",
    "Settings",
]
__version__ = "0.1.0"
