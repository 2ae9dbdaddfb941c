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
