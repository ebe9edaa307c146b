"""Which repo files are staged: what vLLM loads, not every copy of the weights."""

from __future__ import annotations

from cluster.staging.manifest import is_alternative_weight_file, select_files


def test_safetensors_repos_skip_other_weight_formats_and_the_original_folder():
    paths = [
        ".gitattributes",
        "config.json",
        "tokenizer.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "pytorch_model.bin",
        "model.gguf",
        "original/consolidated.00.pth",
        "original/params.json",
    ]
    assert select_files(paths) == [
        "config.json",
        "tokenizer.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]


def test_a_repo_with_only_pytorch_weights_keeps_them():
    assert select_files(["config.json", "pytorch_model.bin"]) == [
        "config.json",
        "pytorch_model.bin",
    ]


def test_nested_folders_other_than_original_are_kept():
    assert not is_alternative_weight_file("tokenizer/vocab.json")
    assert is_alternative_weight_file("original/tokenizer.model")
