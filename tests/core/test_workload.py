import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infertune.core.errors import UserError
from infertune.core.workload import DEFAULT_PROMPTS, ChatMessage, Workload, load_workload, read_run_file, workload_from


def test_defaults_are_a_small_chat_workload():
    wl = Workload()
    prompts = wl.prompt_list()
    assert len(prompts) == len(DEFAULT_PROMPTS)
    assert all(isinstance(p, list) and isinstance(p[0], ChatMessage) for p in prompts)
    assert wl.model == "demo" and wl.max_new_tokens == 32 and wl.batch == 1 and wl.warmup == 1


def test_batches_cycle_prompts_so_every_call_is_full():
    wl = Workload(prompts=["a", "b", "c", "d"], batch=3)
    assert wl.batches() == [[0, 1, 2], [3, 0, 1]]
    assert Workload(prompts=["a"], batch=2).batches() == [[0, 0]]
    assert Workload(prompts=["a", "b"]).batches() == [[0], [1]]


def test_yaml_file_with_flags_on_top(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("max_new_tokens: 64\nbatch: 2\nprompts:\n  - hello\n  - - role: user\n      content: hi\n")
    wl = load_workload(f, batch=4, input_len=None)
    assert wl.max_new_tokens == 64  # from the file
    assert wl.batch == 4  # the flag wins
    assert wl.prompts[0] == "hello"
    assert wl.prompts[1][0].content == "hi"


def test_toml_and_json_files_and_a_nested_workload_key(tmp_path):
    t = tmp_path / "w.toml"
    t.write_text('[workload]\nmax_new_tokens = 8\nprompts = ["x"]\n')
    assert load_workload(t).max_new_tokens == 8
    j = tmp_path / "w.json"
    j.write_text(json.dumps({"input_len": 128, "repeats": 3}))
    wl = load_workload(j)
    assert (wl.input_len, wl.repeats) == (128, 3)


@pytest.mark.parametrize(
    "text, field",
    [
        ("max_new_tokens: 0\n", "max_new_tokens"),
        ("batch: -1\n", "batch"),
        ("max_new_tokens: lots\n", "max_new_tokens"),
        ("warmpu: 1\n", "warmpu"),  # a typo is an error, not a silently ignored key
        ("prompts: []\n", "prompts"),
        ("prompts:\n  - - role: robot\n      content: hi\n", "prompts.0"),
    ],
)
def test_invalid_values_name_the_field(tmp_path, text, field):
    f = tmp_path / "w.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_workload(f)
    msg = str(e.value)
    assert f"field '{field}" in msg and "\n" not in msg


@pytest.mark.parametrize("text", ["a: [1, 2\n", "- just\n- a list\n", "batch: 1\n\tbad: tab"])
def test_malformed_files_are_one_clear_error(tmp_path, text):
    f = tmp_path / "w.yaml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_workload(f)
    assert "\n" not in str(e.value) and str(f) in str(e.value)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        read_run_file(tmp_path / "nope.yaml")
    b = tmp_path / "b.yaml"
    b.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError):
        read_run_file(b)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200), st.sampled_from([".yaml", ".toml", ".json"]))
def test_any_file_content_gives_a_workload_or_one_user_error(tmp_path_factory, text, suffix):
    f = tmp_path_factory.mktemp("fuzz") / f"w{suffix}"
    f.write_text(text, encoding="utf-8")
    try:
        wl = load_workload(f)
    except UserError as e:
        assert "\n" not in str(e)
    else:
        assert isinstance(wl, Workload)


def test_run_file_with_workload_and_config_sections(tmp_path):
    from infertune.core.config import config_from

    f = tmp_path / "run.yaml"
    f.write_text(
        "workload:\n  max_new_tokens: 9\nconfig:\n  dtype: bf16\n  generate_kwargs:\n    repetition_penalty: 1.1\n"
    )
    wl_data, cfg_data = read_run_file(f)
    assert workload_from(wl_data).max_new_tokens == 9
    cfg = config_from(cfg_data, attn_implementation="eager", dtype=None)
    assert cfg.dtype == "bfloat16" and cfg.attn_implementation == "eager"
    assert cfg.generation_kwargs() == {"repetition_penalty": 1.1}
    f.write_text("config:\n  dtype: int3\n")
    with pytest.raises(UserError, match="field 'dtype'"):
        config_from(read_run_file(f)[1])
    f.write_text("config: []\n")
    with pytest.raises(UserError, match="section 'config' must be a mapping"):
        read_run_file(f)
    f.write_text("workload: {}\nextra: 1\n")
    with pytest.raises(UserError, match="unknown top-level keys"):
        read_run_file(f)


def test_mixed_input_lengths_cycle_prompts_until_every_length_is_used():
    wl = Workload(prompts=["a", "b"], input_lens=[16, 64, 256])
    assert wl.prompt_list() == ["a", "b", "a"]
    assert [wl.input_len_of(i) for i in range(3)] == [16, 64, 256] and wl.longest_input == 256
    assert Workload(input_len=128).input_len_of(5) == 128 and Workload().longest_input is None
    with pytest.raises(ValueError, match="not both"):
        Workload(input_len=128, input_lens=[16, 32])


def test_the_observed_section_is_advise_s_and_the_workload_leaves_it(tmp_path):
    from infertune.core.workload import load_run, read_observed

    f = tmp_path / "run.yaml"
    f.write_text("model: demo\nmax_new_tokens: 8\nobserved:\n  tpot: 220ms\n  oom: load\n")
    assert read_observed(f) == {"tpot": "220ms", "oom": "load"}
    wl, cfg = load_run(f)
    assert wl.max_new_tokens == 8 and cfg == {}
    assert read_observed(None) is None
    f.write_text("model: demo\nobserved: 220ms\n")
    with pytest.raises(UserError, match="section 'observed' must be a mapping"):
        read_observed(f)
