"""Credential files stay out of the file tools even when the workspace is the home folder (issue 14):
registry, infrastructure and model-hub tokens, browser profiles, shell histories, cloud CLI folders."""
import pytest

from orchestrator.tools.base import ToolError
from orchestrator.tools.files import _read
from orchestrator.tools.search import GrepArgs, _grep
from orchestrator.tools.session import ToolSession

CREDENTIAL_FILES = [
    ".npmrc", ".yarnrc.yml", ".pypirc", ".cargo/credentials.toml", ".gem/credentials", ".vault-token",
    ".terraform.d/credentials.tfrc.json", ".terraformrc", ".config/gh/hosts.yml", ".config/hub",
    ".huggingface/token", ".cache/huggingface/token", ".mozilla/firefox/x.default/logins.json",
    ".config/google-chrome/Default/Login Data", ".config/chromium/Default/Cookies", ".bash_history",
    ".zsh_history", ".python_history", ".aws/credentials", ".config/gcloud/credentials.db", ".azure/config",
    ".kube/config", ".docker/config.json", ".ssh/id_ed25519", ".netrc", ".git-credentials", ".config/rclone/rclone.conf",
    ".kaggle/kaggle.json", ".oci/config", ".s3cfg",
]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for rel in CREDENTIAL_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("TOKEN-abc123\n")
    (tmp_path / "notes.txt").write_text("TOKEN-abc123 is a fake, quoted in my notes\n")
    return tmp_path


@pytest.mark.parametrize("rel", CREDENTIAL_FILES)
def test_read_file_refuses_credentials_in_a_home_workspace(home, rel):
    with pytest.raises(ToolError, match="holds credentials"):
        _read(ToolSession(home), rel)


def test_grep_files_skips_credentials_in_a_home_workspace(home):
    found = _grep(ToolSession(home), GrepArgs(pattern="TOKEN-abc123", path=".", include_ignored=True))
    assert "notes.txt" in found and found.count("TOKEN-abc123") == 1, found


def test_a_project_of_its_own_may_keep_an_npmrc(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / ".npmrc").write_text("save-exact=true\n")
    assert "save-exact" in _read(ToolSession(tmp_path / "proj"), ".npmrc")[1]


def test_file_tools_do_not_write_git_hooks_or_config(tmp_path):
    from orchestrator.tools.files import _write

    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    session = ToolSession(tmp_path)
    for rel in (".git/config", ".git/hooks/pre-commit", "sub/.git/hooks/post-checkout"):
        with pytest.raises(ToolError, match="git runs what it configures"):
            _write(session, rel, tmp_path / rel, "[core]\n\tfsmonitor = touch /tmp/x\n", None, ())
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"
    assert "[core]" in _read(session, ".git/config")[1]  # reading stays allowed


def test_edit_file_does_not_change_git_config_either(tmp_path):
    from orchestrator.tools.files import _edit

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n\tbare = false\n")
    with pytest.raises(ToolError, match="git runs what it configures"):
        _edit(ToolSession(tmp_path), ".git/config", tmp_path / ".git/config", "bare = false", "fsmonitor = x", None,
              ())
