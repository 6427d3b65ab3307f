from __future__ import annotations

from pathlib import Path

import pytest

from subagents.config import Settings, load_settings, mask_secret, user_config_dir
from subagents.exceptions import ConfigError


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    project = tmp_path / "project"
    (project / ".subagents").mkdir(parents=True)
    user = tmp_path / "xdg"
    (user / "subagents").mkdir(parents=True)
    return project, user, {"XDG_CONFIG_HOME": str(user)}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def project_file(project: Path) -> Path:
    return project / ".subagents" / "config.toml"


def user_file(user: Path) -> Path:
    return user / "subagents" / "config.toml"


def test_defaults_without_files(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    s = load_settings(project, env=env)
    assert (s.model_default, s.max_threads, s.max_depth, s.store_url) == (None, 4, 2, None)
    assert s.sources["agents.max_threads"] == "default"
    assert s.providers == {}
    assert s.pricing == {}


def test_user_config_dir_follows_xdg(tmp_path: Path) -> None:
    assert user_config_dir({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "subagents"


def test_precedence_argument_env_project_user(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, user, env = dirs
    uf = write(user_file(user), """
[model]
default = "openai:gpt-4.1"
[agents]
max_threads = 8
max_depth = 5
result_max_chars = 100
[tools]
bash_timeout_s = 30
""")
    pf = write(project_file(project), """
[agents]
max_threads = 6
max_depth = 3
""")
    env |= {"SUBAGENTS_MAX_THREADS": "7", "SUBAGENTS_STORE": "sqlite:///x.db"}
    s = load_settings(project, env=env, overrides={"max_threads": 9, "max_depth": None})
    assert s.model_default == "openai:gpt-4.1"
    assert s.sources["model.default"] == str(uf)
    assert (s.max_threads, s.sources["agents.max_threads"]) == (9, "argument")
    assert (s.max_depth, s.sources["agents.max_depth"]) == (3, str(pf))
    assert (s.result_max_chars, s.sources["agents.result_max_chars"]) == (100, str(uf))
    assert (s.store_url, s.sources["store.url"]) == ("sqlite:///x.db", "env SUBAGENTS_STORE")
    assert s.bash_timeout_s == 30.0
    assert isinstance(s.bash_timeout_s, float)
    assert s.sources["agents.briefing"] == "default"
    # without the argument, the environment wins over both files
    s2 = load_settings(project, env=env)
    assert (s2.max_threads, s2.sources["agents.max_threads"]) == (7, "env SUBAGENTS_MAX_THREADS")


def test_overrides_accept_dotted_keys(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    s = load_settings(project, env=env, overrides={"model.default": "anthropic:claude-sonnet-4-5"})
    assert (s.model_default, s.sources["model.default"]) == ("anthropic:claude-sonnet-4-5", "argument")


def test_providers_and_pricing(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    pf = write(project_file(project), """
[providers.openai]
base_url = "http://localhost:11434/v1"
max_retries = 0
timeout_s = 30
[pricing."my-model-1.5"]
input = 1
output = 2.5
""")
    env |= {"OPENAI_API_KEY": "sk-proj-abcdefghijklmnop", "ANTHROPIC_API_KEY": "sk-ant-0123456789xyz"}
    s = load_settings(project, env=env, trust=True)
    assert s.providers == {
        "openai": {"base_url": "http://localhost:11434/v1", "max_retries": 0, "timeout_s": 30.0,
                   "api_key": "sk-proj-abcdefghijklmnop"},
        "anthropic": {"api_key": "sk-ant-0123456789xyz"},
    }
    assert s.pricing == {"my-model-1.5": {"input": 1.0, "output": 2.5}}
    assert s.sources["providers.openai.api_key"] == "env OPENAI_API_KEY"
    assert s.sources["providers.openai.base_url"] == str(pf)
    assert s.sources['pricing."my-model-1.5".output'] == str(pf)


def test_api_keys_are_masked_when_shown(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    env["ANTHROPIC_API_KEY"] = "sk-ant-api03-secretsecret-WXYZ"
    s = load_settings(project, env=env)
    shown = s.to_dict()
    assert shown["providers.anthropic.api_key"] == {"value": "****WXYZ", "source": "env ANTHROPIC_API_KEY"}
    assert "secretsecret" not in repr(s)
    assert "secretsecret" not in str(shown)
    assert s.to_dict(masked=False)["providers.anthropic.api_key"]["value"] == "sk-ant-api03-secretsecret-WXYZ"
    assert mask_secret("short") == "****"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[agents]\nmax_threads = "four"\n', '[agents] max_threads must be a positive integer, got "four"'),
        ("[agents]\nmax_threads = 0\n", "[agents] max_threads must be a positive integer, got 0"),
        ("[agents]\nmax_depth = true\n", "[agents] max_depth must be a non-negative integer, got true"),
        ("[model]\ndefault = 3\n", "[model] default must be a string, got 3"),
        ('[store]\non_restart = "later"\n',
         "[store] on_restart must be one of 'resume', 'mark_interrupted', got \"later\""),
        ("[tools]\nbash_timeout_s = [1]\n", "[tools] bash_timeout_s must be a positive number, got an array"),
        ("[agents]\nmax_thread = 4\n",
         "unknown key [agents] max_thread (did you mean max_threads?); "
         "known keys of [agents]: max_threads, when_full, max_depth, briefing, result_max_chars"),
        ("[agent]\nmax_threads = 4\n",
         "unknown section [agent] (did you mean agents?); "
         "known sections: agents, announce, cleanup, engine, hooks, limits, mcp, model, permissions, pricing, "
         "providers, sandbox, store, telemetry, tools, web"),
        ('model = "x"\n', "model must be a table ([model]), got \"x\""),
        ('[providers.gemini]\napi_key = "x"\n',
         "unknown provider [providers.gemini]; known providers: anthropic, openai"),
        ("[providers.openai]\nretries = 2\n",
         "unknown key [providers.openai] retries (did you mean max_retries?); "
         "known keys: api_key, base_url, max_retries, retry_base_s, retry_max_s, connect_timeout_s, "
         "read_timeout_s, stall_timeout_s, timeout_s, max_output_tokens, stream"),
        ('[pricing."m"]\ninput = 1\n', '[pricing.m] needs output (USD per million tokens)'),
        ('[pricing.m]\ninput = 1\noutput = "2"\n', '[pricing.m] output must be a non-negative number, got "2"'),
    ],
)
def test_bad_file_values_name_file_key_and_type(
    dirs: tuple[Path, Path, dict[str, str]], text: str, message: str
) -> None:
    project, _, env = dirs
    pf = write(project_file(project), text)
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env)
    assert str(e.value) == f"{pf}: {message}"


def test_bad_user_file_is_named(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, user, env = dirs
    uf = write(user_file(user), "[agents]\nmax_threads = 2.5\n")
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env)
    assert str(e.value) == f"{uf}: [agents] max_threads must be a positive integer, got 2.5"


def test_bad_toml_syntax_names_the_file(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    pf = write(project_file(project), "[agents\nmax_threads = 4\n")
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env)
    assert str(e.value) == (f"{pf}: invalid TOML: Expected ']' at the end of a table declaration "
                            "(at line 1, column 8); fix the syntax of this file")


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("SUBAGENTS_MAX_THREADS", "four",
         'environment variable SUBAGENTS_MAX_THREADS must be a positive integer, got "four"'),
        ("SUBAGENTS_MAX_DEPTH", "-1",
         "environment variable SUBAGENTS_MAX_DEPTH must be a non-negative integer, got -1"),
    ],
)
def test_bad_env_values_name_the_variable(
    dirs: tuple[Path, Path, dict[str, str]], var: str, value: str, message: str
) -> None:
    project, _, env = dirs
    env[var] = value
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env)
    assert str(e.value) == message


def test_empty_env_values_are_ignored(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    env |= {"SUBAGENTS_MODEL": "", "ANTHROPIC_API_KEY": "  "}
    s = load_settings(project, env=env)
    assert s.model_default is None
    assert s.providers == {}


def test_bad_arguments(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, _, env = dirs
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env, overrides={"max_threads": "x"})
    assert str(e.value) == 'argument max_threads must be a positive integer, got "x"'
    with pytest.raises(ConfigError, match="unknown setting 'threads' passed as an argument"):
        load_settings(project, env=env, overrides={"threads": 3})


def test_settings_field_names_are_stable() -> None:
    names = [f for f in Settings.__dataclass_fields__]
    assert names[:12] == ["model_default", "max_threads", "max_depth", "briefing", "result_max_chars", "store_url",
                          "on_restart", "archive_after_minutes", "bash_timeout_s", "providers", "pricing", "sources"]


def test_permission_sandbox_and_limit_keys(dirs: tuple[Path, Path, dict[str, str]]) -> None:
    project, user, env = dirs
    uf = write(user_file(user), '[permissions]\nallow = ["bash(ls*)"]\n[sandbox]\nunprotect = [".qwen"]\n'
                                'protect = ["a"]\n')
    pf = write(project_file(project), '[permissions]\nmode = "bypassPermissions"\nallow = ["write_file"]\n'
                                      'approval_timeout_s = 30\n[sandbox]\nprotect = ["b"]\nnetwork = true\n'
                                      '[limits]\nmax_turns = 0\nroot_max_turns = 9\n'
                                      '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "g.sh"\ntimeout_s = 5\n'
                                      '[[hooks.PreToolUse]]\ncommand = "h.sh"\non_error = "block"\n')
    s = load_settings(project, env={**env, "SUBAGENTS_PERMISSION_MODE": "acceptEdits"}, trust=True)
    assert (s.permission_mode, s.sources["permissions.mode"]) == ("autoEdit", "env SUBAGENTS_PERMISSION_MODE")
    assert s.allow == ["bash(ls*)", "write_file"]  # lists add up: user file, then project file
    assert s.sources["permissions.allow"] == f"{uf}, {pf}"
    assert (s.protect, s.unprotect, s.sandbox_network) == (["a", "b"], [".qwen"], True)
    assert (s.child_max_turns, s.root_max_turns, s.approval_timeout_s) == (0, 9, 30.0)
    assert s.hooks == {"PreToolUse": [{"matcher": "bash", "command": "g.sh", "timeout_s": 5.0},
                                      {"command": "h.sh", "on_error": "block"}]}
    assert s.sources["hooks.PreToolUse[1]"] == str(pf)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[sandbox]\nunprotect = [".git"]\n', "[sandbox] unprotect is read only from your user config file"),
        ('[permissions]\nmode = "careful"\n', "[permissions] mode must be one of 'plan', 'default', 'autoEdit', "
                                             "'yolo', 'acceptEdits', 'bypassPermissions', got \"careful\""),
        ("[permissions]\nallow = \"bash\"\n", '[permissions] allow must be a list of strings, got "bash"'),
        ("[sandbox]\nnetwork = 1\n", "[sandbox] network must be a boolean, got 1"),
        ('[[hooks.PreToolUse]]\nmatcher = "bash"\n', "[[hooks.PreToolUse]] needs a command"),
        ('[[hooks.BeforeTool]]\ncommand = "x"\n', "unknown hook event [[hooks.BeforeTool]]"),
        ('[[hooks.Stop]]\ncommand = "x"\non_error = "maybe"\n',
         "[[hooks.Stop]] on_error must be one of 'allow', 'block', got \"maybe\""),
        ('[hooks]\nStop = "x"\n', 'hooks.Stop must be an array of tables ([[hooks.Stop]]), got "x"'),
    ],
)
def test_bad_authority_settings_say_what_is_wrong(dirs: tuple[Path, Path, dict[str, str]], text: str,
                                                  message: str) -> None:
    project, _, env = dirs
    write(project_file(project), text)
    with pytest.raises(ConfigError) as e:
        load_settings(project, env=env)
    assert message in str(e.value)
