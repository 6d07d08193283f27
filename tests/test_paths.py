"""Chat ids become folder names that stay inside their channel folder and never collide."""

import pytest
from hypothesis import given, strategies as st

from memory.keys import MAX_ID_BYTES
from memory.paths import ChatFiles, chat_dir_name, chat_id_from_dir

HOSTILE = ["..", ".", "../../etc", "a/b", "a\\b", "\x00", "~abc", "-100123", "x" * 150, "C01/1700000000.1",
           "Zoë", " ", "con", "a\nb"]


@pytest.mark.parametrize("chat_id", HOSTILE)
def test_hostile_ids_stay_inside_channel_folder(tmp_path, chat_id):
    """Every hostile id maps to a direct child of chats/<channel>/."""
    files = ChatFiles.locate(tmp_path, "http", chat_id)
    assert files.dir.parent == tmp_path / "chats" / "http"
    assert files.dir.resolve().parent == (tmp_path / "chats" / "http").resolve()
    assert "/" not in files.dir.name and "\x00" not in files.dir.name and files.dir.name not in (".", "..")


def test_plain_ids_are_used_as_they_are():
    """Ids that are already safe names are readable on disk."""
    assert chat_dir_name("-1001234567890") == "-1001234567890"
    assert chat_dir_name("C024BE91L") == "C024BE91L"


@given(st.text(min_size=1, max_size=60))
def test_encoding_is_reversible(chat_id):
    """Distinct ids never share a folder: the folder name decodes back to the id."""
    assert chat_id_from_dir(chat_dir_name(chat_id)) == chat_id


def test_overlong_and_empty_ids_are_refused():
    """Ids that cannot make a valid file name are refused with a clear error."""
    with pytest.raises(ValueError, match="bytes long"):
        chat_dir_name("é" * MAX_ID_BYTES)
    with pytest.raises(ValueError):
        chat_dir_name("")


def test_bad_channel_name_is_refused(tmp_path):
    """A channel name cannot smuggle a path either."""
    with pytest.raises(ValueError):
        ChatFiles.locate(tmp_path, "../x", "1")
