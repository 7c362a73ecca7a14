"""Settings: the schema is the source of truth; every bad value yields a readable message."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from rag_lsp.config import (
    CONFIG_FILE_NAME,
    Settings,
    confine_folder_settings,
    load_schema,
    load_settings,
    validate_settings,
)
from rag_lsp.errors import ConfigError
from rag_lsp.server.client_settings import ClientSettings, folder_index_dir, only_search_changed


def write_config(root: Path, data: object) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    (root / CONFIG_FILE_NAME).write_text(text, encoding="utf-8")


def problems_for(raw: dict, source: str = ".rag-lsp.json") -> list[str]:
    return validate_settings(raw, source=source)[1]


def test_schema_is_valid_and_complete():
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name
        assert "default" in prop, name
        Draft202012Validator(schema).validate({name: prop["default"]})


def test_defaults_equal_schema_defaults():
    defaults = {k: v["default"] for k, v in load_schema()["properties"].items()}
    assert Settings().to_dict() == defaults
    assert Settings.from_dict({}) == Settings()
    # every schema property has a field, and nothing else does
    assert len(dataclasses.fields(Settings)) == len(defaults)


def test_defaults_are_sensible():
    s = Settings()
    assert s.chunk_tokens == 254 and s.chunk_overlap_tokens == 32
    assert s.search_mode == "hybrid" and s.enabled and s.use_gitignore
    assert ".py" in s.extensions and ".md" in s.extensions and ".proto" in s.extensions


def test_round_trip_through_dict():
    s = Settings(extensions=(".py",), top_k=3, index_path="idx", search_mode="lexical")
    assert Settings.from_dict(s.to_dict()) == s
    assert s.to_dict()["topK"] == 3 and s.to_dict()["extensions"] == [".py"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"chunkTokens": 1000},
         "`chunkTokens` = 1000 in .rag-lsp.json: must be at most 254 (default 254)"),
        ({"chunkTokens": 8}, "`chunkTokens` = 8 in .rag-lsp.json: must be at least 32"),
        ({"searchMode": "fuzzy"},
         "`searchMode` = 'fuzzy' in .rag-lsp.json: must be one of 'vector', 'lexical', 'hybrid'"),
        ({"extensions": [".py", ".md", "py"]},
         "`extensions`[2] = 'py' in .rag-lsp.json: must look like '.py'"),
        ({"topK": "5"}, "`topK` = '5' in .rag-lsp.json: must be an integer"),
        ({"topK": 2.5}, "`topK` = 2.5 in .rag-lsp.json: must be an integer"),
        ({"threshold": 1.5}, "`threshold` = 1.5 in .rag-lsp.json: must be at most 1"),
        ({"useGitignore": "yes"}, "`useGitignore` = 'yes' in .rag-lsp.json: must be true or false"),
        ({"indexPath": 3}, "`indexPath` = 3 in .rag-lsp.json: must be a string or null"),
        ({"exclude": ["a", 7]}, "`exclude`[1] = 7 in .rag-lsp.json: must be a string"),
        ({"extensions": [".py", ".py"]}, "must not repeat items ('.py' appears twice)"),
    ],
)
def test_bad_values_name_setting_value_and_rule(raw, expected):
    problems = problems_for(raw)
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_unknown_key_suggests_closest():
    (problem,) = problems_for({"topk": 5})
    assert "unknown setting `topk` in .rag-lsp.json" in problem
    assert "did you mean `topK`?" in problem
    assert "chunkTokens" in problem  # lists the known settings
    (problem,) = problems_for({"chunk_tokens": 100})
    assert "did you mean `chunkTokens`?" in problem


def test_overlap_must_be_less_than_chunk_size():
    settings, problems = validate_settings(
        {"chunkTokens": 64, "chunkOverlapTokens": 64}, source=".rag-lsp.json"
    )
    assert problems == [
        "`chunkOverlapTokens` = 64 in .rag-lsp.json: must be less than `chunkTokens` (64)"
    ]
    assert settings.chunk_tokens == 64 and settings.chunk_overlap_tokens < 64


def test_lenient_mode_falls_back_per_setting():
    settings, problems = validate_settings(
        {"topK": 0, "searchMode": "lexical", "extensions": ["py"], "bogus": 1}, source="editor"
    )
    assert len(problems) == 3
    assert settings.top_k == Settings().top_k  # bad -> default
    assert settings.extensions == Settings().extensions
    assert settings.search_mode == "lexical"  # good values are kept


def test_an_exclude_pattern_that_cannot_be_read_is_named_and_dropped():
    settings, problems = validate_settings({"exclude": ["docs/", "src/[z-a]*", "\\"]},
                                           source=".rag-lsp.json")
    assert settings.exclude == ("docs/",)
    assert len(problems) == 2
    assert problems[0].startswith("`exclude`[1] = 'src/[z-a]*' in .rag-lsp.json: not a "
                                  "gitignore-style pattern (bad character range z-a")
    assert problems[1].startswith("`exclude`[2] = ")


def test_nan_is_not_a_number_nor_a_whole_float_an_integer():
    # The standard's checks pass both (NaN fails no comparison; 5.0 counts as an integer),
    # and both then broke the code that used them.
    settings, problems = validate_settings(
        {"threshold": float("nan"), "topK": 5.0, "maxFileBytes": 1000}, source="editor")
    assert problems == ["`threshold` = nan in editor: must be a number (default 0.15)",
                        "`topK` = 5.0 in editor: must be an integer (default 10)"]
    assert settings.threshold == Settings().threshold and settings.top_k == Settings().top_k
    assert settings.max_file_bytes == 1000


def test_non_object_settings():
    settings, problems = validate_settings([1, 2], source="editor")
    assert settings == Settings()
    assert problems == ["settings in editor must be an object, got a list"]


def test_load_without_file_gives_defaults(tmp_path):
    assert load_settings(tmp_path) == Settings()


def test_load_reads_file_and_overrides_win(tmp_path):
    write_config(tmp_path, {"topK": 5, "searchMode": "vector", "exclude": ["gen/"]})
    settings = load_settings(tmp_path, {"searchMode": "lexical", "topK": None})
    assert settings.top_k == 5  # None overrides are ignored
    assert settings.search_mode == "lexical"
    assert settings.exclude == ("gen/",)


def test_load_strict_raises_with_all_problems(tmp_path):
    write_config(tmp_path, {"chunkTokens": 1000, "topK": 0})
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    assert len(info.value.problems) == 2
    assert "`chunkTokens` = 1000 in .rag-lsp.json: must be at most 254" in str(info.value)


def test_override_problem_names_the_flag(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, {"searchMode": "fuzzy"}, override_sources={"searchMode": "--mode"})
    (problem,) = info.value.problems
    assert problem.startswith(
        "`searchMode` = 'fuzzy' in --mode: must be one of 'vector', 'lexical', 'hybrid'"
    )
    with pytest.raises(ConfigError, match="in command line"):
        load_settings(tmp_path, {"topK": 999})


def test_invalid_json_reports_line_and_column(tmp_path):
    write_config(tmp_path, '{\n  "topK": 5,\n  "searchMode": hybrid\n}\n')
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path)
    (problem,) = info.value.problems
    assert f"{tmp_path / CONFIG_FILE_NAME}:3:17: invalid JSON" in problem


def test_file_must_hold_an_object(tmp_path):
    write_config(tmp_path, "[]")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_settings(tmp_path)


@pytest.mark.parametrize("make", [
    lambda path: path.mkdir(),
    lambda path: os.mkfifo(path),  # reading it would wait for a writer forever
])
def test_a_settings_file_that_is_not_a_file_is_reported_not_passed_over(tmp_path, make):
    make(tmp_path / CONFIG_FILE_NAME)
    with pytest.raises(ConfigError, match="is not a regular file .*move it aside"):
        load_settings(tmp_path)
    problems: list[str] = []
    settings = ClientSettings({}).for_folder(tmp_path, problems.extend)
    assert settings.top_k == Settings().top_k  # the server goes on with the defaults
    assert len(problems) == 1 and "is not a regular file" in problems[0]


def test_index_dir_and_model_path(tmp_path):
    assert Settings().index_dir(tmp_path) == tmp_path / ".rag-lsp"
    assert Settings(index_path="cache/idx").index_dir(tmp_path) == tmp_path / "cache" / "idx"
    assert Settings(index_path=str(tmp_path / "abs")).index_dir(Path("/x")) == tmp_path / "abs"
    assert Settings().model_path(tmp_path) is None
    assert Settings(model_dir="m").model_path(tmp_path) == tmp_path / "m"


@pytest.mark.parametrize(("index_path", "kept"), [
    (".rag-lsp", True), ("build/index", True), (".", True),
    ("/tmp/elsewhere", False), ("../outside", False), ("sub/../../outside", False),
    ("~/rag-index", False),
])
def test_a_folder_settings_file_keeps_the_index_inside_the_folder(tmp_path, index_path, kept):
    path = tmp_path / CONFIG_FILE_NAME
    settings, problems = confine_folder_settings({"indexPath": index_path, "topK": 3},
                                                 tmp_path, path)
    assert ("indexPath" in settings) == kept and settings["topK"] == 3
    if kept:
        assert problems == []
    else:
        assert len(problems) == 1 and "inside the folder" in problems[0]
        assert "the default is used" in problems[0]  # the server goes on with it
        assert repr(index_path) in problems[0] and str(path) in problems[0]


def test_the_cli_refuses_an_outside_index_path_from_the_folder_file_unless_given_a_flag(
        tmp_path):
    (tmp_path / CONFIG_FILE_NAME).write_text('{"indexPath": "/tmp/elsewhere"}')
    with pytest.raises(ConfigError) as error:
        load_settings(tmp_path)
    assert "inside the folder" in str(error.value)
    assert "nothing was done" in str(error.value)  # not "the default is used": it was not
    assert "the default is used" not in str(error.value)
    flag = str(tmp_path / "idx")
    assert load_settings(tmp_path, {"indexPath": flag}).index_path == flag


@pytest.mark.parametrize(
    ("value", "expected"),
    [(-1, "`indexThreads` = -1 in .rag-lsp.json: must be at least 0 (default null)"),
     ("auto", "`indexThreads` = 'auto' in .rag-lsp.json: must be an integer or null"),
     (1.5, "`indexThreads` = 1.5 in .rag-lsp.json: must be an integer or null")],
)
def test_bad_index_threads_are_rejected_and_fall_back(value, expected):
    settings, problems = validate_settings({"indexThreads": value}, source=".rag-lsp.json")
    assert len(problems) == 1 and problems[0].startswith(expected)
    assert settings.index_threads is None


@pytest.mark.parametrize(
    ("setting", "cores", "threads"),
    [(None, 2, 1), (None, 8, 7), (None, 1, 1),  # default: one core left to the editor
     (0, 2, 2), (0, 8, 8),                      # 0: every core
     (3, 8, 3), (4, 2, 4)],                     # a number: that many
)
def test_index_threads_resolve(setting, cores, threads):
    assert Settings(index_threads=setting).indexing_threads(cores) == threads


@pytest.mark.parametrize(("change", "search_only"), [
    ({"threshold": 0.3}, True),
    ({"answerThreshold": 0.5}, True),
    ({"rankInternalPrior": 1.0}, True),
    ({"topK": 3, "searchMode": "lexical"}, True),
    ({"chunkTokens": 128}, False),
    ({"threshold": 0.3, "exclude": ["dist/"]}, False),
])
def test_search_settings_apply_without_reindexing(change, search_only):
    """The server re-opens its folders (and re-indexes) unless only search settings changed."""
    assert only_search_changed(Settings(), Settings.from_dict(change)) is search_only


def test_an_absolute_index_path_gives_each_folder_its_own_subfolder(tmp_path):
    """The editor's storage folder holds every folder's index, each under a name of its path
    (``folder_index_dir``, which bench/server_latency.py uses to find the server's index); a
    relative one stays inside each folder."""
    problems: list[str] = []
    shared = ClientSettings({"indexPath": str(tmp_path / "storage")})
    first, second = tmp_path / "a" / "app", tmp_path / "b" / "app"
    dirs = [shared.for_folder(root, problems.extend).index_dir(root) for root in (first, second)]
    assert dirs == [folder_index_dir(tmp_path / "storage", first),
                    folder_index_dir(tmp_path / "storage", second)]
    assert dirs[0] != dirs[1] and all(d.parent == tmp_path / "storage" for d in dirs)
    # The name must not change: indexes users have are found by it.
    digest = hashlib.sha256(str(first).encode()).hexdigest()[:10]
    assert dirs[0] == tmp_path / "storage" / f"app-{digest}"
    inside = ClientSettings({"indexPath": ".idx"}).for_folder(first, problems.extend)
    assert inside.index_dir(first) == first / ".idx"
    assert problems == []
