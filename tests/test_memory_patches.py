"""Letta's memory patch format: single-block diffs, multi-block sections, and the refusals
(in Letta's words) that leave every block as it was."""

from __future__ import annotations

import pytest

from stateloop import Block
from stateloop.memory.patches import READ_ONLY_ERROR, apply_hunks, is_multi_block, parse, plan


def test_a_hunk_replaces_its_context_where_it_occurs_once():
    value = "Name: Ada\nPet: cat\nCity: Paris"
    assert apply_hunks(value, " Name: Ada\n-Pet: cat\n+Pet: dog\n+Pet: fish") == (
        "Name: Ada\nPet: dog\nPet: fish\nCity: Paris")


def test_hunks_apply_in_order_to_the_text_the_last_left():
    value = "a\nb\nc\nd"
    patch = "@@ -1 +1 @@\n-a\n+A\n@@\n c\n-d\n+D\n@@\n-A\n+first"
    assert apply_hunks(value, patch) == "first\nb\nc\nD"


def test_diff_headers_and_metadata_lines_are_ignored_and_a_blank_line_is_context():
    value = "one\n\nthree"
    patch = "--- a/block\n+++ b/block\nindex 123\n one\n\n-three\n+3"
    assert apply_hunks(value, patch) == "one\n\n3"


def test_a_hunk_of_additions_only_appends_and_tabs_become_spaces():
    # As in Letta, the patch's lines are expanded whole: "+<tab>" reaches column 8.
    assert apply_hunks("a", "+b\n+\tc") == "a\nb\n" + " " * 7 + "c"
    assert apply_hunks("", "+first") == "first"


def test_context_that_is_missing_or_ambiguous_is_refused_in_lettas_words():
    with pytest.raises(ValueError) as missing:
        apply_hunks("a\nb", "-x\n+y")
    assert str(missing.value) == (
        "Failed to apply patch: expected hunk context not found in the memory block. Verify "
        "the target lines exist and try providing more context. Expected start:\nx")
    with pytest.raises(ValueError, match="hunk context matched multiple places"):
        apply_hunks("dup\nx\ndup", "-dup\n+one")
    with pytest.raises(ValueError, match="No applicable hunks found in patch"):
        apply_hunks("a", "nothing here")


def test_headers_make_a_multi_block_patch():
    assert not is_multi_block("*** Begin Patch\n-a\n+b\n*** End Patch")
    for header in ("*** Add Block: x", "*** Update Block: x", "*** Delete Block: x",
                   "*** Move to: y"):
        assert is_multi_block(f"*** Begin Patch\n{header}\n")


def test_sections_are_read_with_their_bodies_descriptions_and_moves():
    sections = parse("*** Begin Patch\n"
                     "*** Add Block: todo\nDescription: Open tasks\n+- buy milk\n\n+- call Bo\n"
                     "*** Update Block: human\n*** Move to: user\n@@\n-Ada\n+Grace\n"
                     "*** Delete Block: scratch\nthis line is ignored\n"
                     "*** End Patch")
    assert [(s.kind, s.label, s.move_to) for s in sections] == [
        ("add", "todo", None), ("update", "human", "user"), ("delete", "scratch", None)]
    assert sections[0].description == "Open tasks"
    assert sections[1].body == ["@@", "-Ada", "+Grace"]
    assert sections[2].body == []


@pytest.mark.parametrize(("patch", "error"), [
    ("*** Add Block:   \n+x", "*** Add Block: must specify a non-empty label"),
    ("*** Update Block:\n", "*** Update Block: must specify a non-empty label"),
    ("*** Delete Block: \n", "*** Delete Block: must specify a non-empty label"),
    ("*** Move to: x\n", "*** Move to: must follow an Add/Update/Delete header"),
    ("*** Add Block: a\n*** Move to:\n", "*** Move to: must specify a non-empty new label"),
    ("*** Delete Block: a\n*** Move to: b\n", "cannot follow *** Delete Block: a"),
])
def test_malformed_sections_are_refused(patch: str, error: str):
    with pytest.raises(ValueError, match=error.replace("*", r"\*")):
        parse(patch)


def blocks() -> list[Block]:
    return [Block("human", "Name: Ada\nPet: cat"), Block("persona", "Kind.", read_only=True),
            Block("notes", "x", limit=10)]


def test_a_plan_lists_the_changes_with_lettas_report_lines():
    sections = parse("*** Add Block: todo\nDescription: Tasks\n+milk\n+eggs\n"
                     "*** Update Block: human\n-Pet: cat\n+Pet: dog\n*** Move to: user\n"
                     "*** Delete Block: notes\n"
                     "*** Update Block: todo\n milk\n-eggs\n+bread")
    changes = plan(sections, blocks())
    assert [(c.kind, c.label) for c in changes] == [
        ("create", "todo"), ("update", "human"), ("rename", "human"), ("delete", "notes"),
        ("update", "todo")]
    assert (changes[0].value, changes[0].description) == ("milk\neggs", "Tasks")
    assert changes[1].value == "Name: Ada\nPet: dog" and changes[2].new_label == "user"
    assert changes[4].value == "milk\nbread"  # against the block the patch added
    assert [c.done for c in changes] == [
        "Created memory block 'todo'", "Updated memory block 'human'",
        "Renamed memory block 'human' to 'user'", "Deleted memory block 'notes'",
        "Updated memory block 'todo'"]


@pytest.mark.parametrize(("patch", "error"), [
    ("*** Add Block: human\n+x", "Error: Memory block 'human' already exists"),
    ("*** Update Block: nope\n-a\n+b", "Error: Memory block 'nope' does not exist"),
    ("*** Delete Block: nope", "Error: Memory block 'nope' does not exist"),
    ("*** Update Block: persona\n-Kind.\n+Evil.", READ_ONLY_ERROR),
    ("*** Delete Block: persona", READ_ONLY_ERROR),
    ("*** Update Block: notes\n-x\n+" + "y" * 11, "over its limit of 10"),
    ("*** Add Block: bad label\n+x", "must be letters, digits"),
    ("*** Update Block: human\n*** Move to: notes\n-Pet: cat\n+Pet: dog",
     "Error: Memory block 'notes' already exists"),
    ("*** Delete Block: notes\n*** Update Block: notes\n-x\n+y",
     "Error: Memory block 'notes' does not exist"),
    ("*** Update Block: human\n", "No applicable hunks found"),
])
def test_a_plan_that_cannot_be_made_is_refused_before_any_change(patch: str, error: str):
    before = blocks()
    with pytest.raises(ValueError) as refused:
        plan(parse("*** Add Block: fresh\n+ok\n" + patch), before)
    assert error in str(refused.value)
    assert [(b.label, b.value) for b in before] == [(b.label, b.value) for b in blocks()]
