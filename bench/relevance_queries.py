"""The questions bench/relevance.py asks, each with the tools a person would accept.

Written before the ranker was tuned, from the tool lists of the peers and the demo
servers, phrased the way a person or a model asks. Local names without the prefix.
"""

from __future__ import annotations

# (question, tools a person would accept as the answer: local names without the prefix)
QUERIES: list[tuple[str, tuple[str, ...]]] = [
    ("what time is it in Tokyo", ("time__get_current_time",)),
    ("what time is it", ("time__get_current_time",)),
    ("convert 3pm New York time to London time", ("time__convert_time",)),
    ("time difference between Paris and Sydney", ("time__convert_time",)),
    ("show uncommitted changes", ("git__git_diff_unstaged", "git__git_status")),
    ("commit my work with a message", ("git__git_commit",)),
    ("stage a file for the next commit", ("git__git_add",)),
    ("list all branches", ("git__git_branch",)),
    ("switch to the develop branch", ("git__git_checkout",)),
    ("create a new branch called feature-x", ("git__git_create_branch",)),
    ("show recent commit history", ("git__git_log",)),
    ("unstage everything", ("git__git_reset",)),
    ("what changed in the last commit", ("git__git_show", "git__git_diff")),
    ("is my working tree clean", ("git__git_status",)),
    ("compare two branches", ("git__git_diff",)),
    ("git log", ("git__git_log",)),
    (
        "remember that Alice works at Acme",
        ("memory__create_entities", "memory__create_relations", "memory__add_observations"),
    ),
    ("forget everything about Bob", ("memory__delete_entities",)),
    ("what do you know about Alice", ("memory__search_nodes", "memory__open_nodes")),
    ("record that Alice is Bob's manager", ("memory__create_relations",)),
    ("dump the whole knowledge graph", ("memory__read_graph",)),
    ("add a fact about an existing person", ("memory__add_observations",)),
    ("delete the relation between two people", ("memory__delete_relations",)),
    ("remove an observation", ("memory__delete_observations",)),
    ("add two numbers", ("everything__get-sum",)),
    ("echo back a message", ("everything__echo",)),
    ("print the environment variables", ("everything__get-env",)),
    ("give me a small picture", ("everything__get-tiny-image",)),
    ("compress a file with gzip", ("everything__gzip-file-as-resource",)),
    ("run a long task and report progress", ("everything__trigger-long-running-operation",)),
    ("turn on logging", ("everything__toggle-simulated-logging",)),
    ("do some deep research on a topic", ("everything__simulate-research-query",)),
    ("find open tickets about login", ("tickets__search",)),
    ("file a bug report", ("tickets__create_ticket",)),
    ("open a new ticket for the broken build", ("tickets__create_ticket",)),
    ("show ticket 42", ("tickets__get_ticket",)),
    ("search my notes for journal", ("notes__search",)),
    ("which notes do I have", ("notes__list_notes",)),
    ("read the note called todo", ("notes__read_note",)),
    (
        "list files in a folder",
        (
            "filesystem__list_directory",
            "filesystem__list_directory_with_sizes",
            "filesystem__directory_tree",
        ),
    ),
    ("listing files", ("filesystem__list_directory", "filesystem__list_directory_with_sizes")),
    ("read a text file", ("filesystem__read_text_file", "filesystem__read_file")),
    ("save this text to a file", ("filesystem__write_file",)),
    ("rename report.txt to final.txt", ("filesystem__move_file",)),
    ("make a new folder", ("filesystem__create_directory",)),
    ("find all python files under src", ("filesystem__search_files",)),
    ("how big is this file and when was it modified", ("filesystem__get_file_info",)),
    ("show the folder structure as a tree", ("filesystem__directory_tree",)),
    ("replace a line in a config file", ("filesystem__edit_file",)),
    ("which directories can you access", ("filesystem__list_allowed_directories",)),
    ("read several files at once", ("filesystem__read_multiple_files",)),
    ("view an image file", ("filesystem__read_media_file",)),
    ("largest files in a directory", ("filesystem__list_directory_with_sizes",)),
]
