"""Settings kept in a .env file reach every shell (an export lasts for one);
the environment still wins."""

from pier.settings import Settings


def test_a_dotenv_file_in_the_working_folder_sets_pier_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIER_BASE_IMAGE", raising=False)
    (tmp_path / ".env").write_text("PIER_BASE_IMAGE=pier-base:from-dotenv\nOTHER_TOOL=ignored\n")
    assert Settings().base_image == "pier-base:from-dotenv"
    monkeypatch.setenv("PIER_BASE_IMAGE", "pier-base:from-env")
    assert Settings().base_image == "pier-base:from-env"
