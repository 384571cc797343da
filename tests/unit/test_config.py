"""config.toml → Settings: good files load, every kind of bad key is one error naming it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from xmpp_queue.config import load_config, parse_config
from xmpp_queue.config_error import ConfigError
from xmpp_queue.core.model import NodeConfig
from xmpp_queue.settings import DEFAULT_DATABASE_URL, Settings

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """
[component]
jid = "queue.example.org"
secret = "s3cret"
"""

FULL = """
[component]
jid = "Queue.Example.ORG"
secret = "s3cret"
server_host = "10.0.0.5"
server_port = 15347

[database]
url = "postgresql://xq:pw@db.internal/queue"

[admins]
jids = ["admin@example.org", "Ops@Example.org"]

[queue]
default_lock_timeout = 60
default_max_deliveries = 5
default_retry_delay = 2
default_retry_delay_max = 120
max_payload_size = 65536

[logging]
level = "debug"
file = "/var/log/xmpp-queue.log"

[pipeline]
master = "local[2]"
"""


def parse(text: str) -> Settings:
    return parse_config(tomllib.loads(text))


def by_key(*cases: tuple[str, str, str]) -> list[object]:
    """Parametrise cases (text, key, expected) with the key as the test id."""
    return [pytest.param(*case, id=case[1]) for case in cases]


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return caught.value


# --- good files ----------------------------------------------------------------------


def test_a_minimal_file_gets_every_default() -> None:
    settings = parse(MINIMAL)
    assert settings.component.jid == "queue.example.org"
    assert settings.component.secret == "s3cret"
    assert (settings.component.server_host, settings.component.server_port) == ("127.0.0.1", 5347)
    assert settings.database.url == DEFAULT_DATABASE_URL == "sqlite:///xmpp-queue.sqlite"
    assert settings.database.backlog_memory_mb == 128
    assert settings.admins.jids == frozenset()
    assert settings.logging.level == "INFO" and settings.logging.file is None
    assert settings.queue.node_config() == NodeConfig()  # the [queue] defaults are the core's
    assert dict(settings.pipeline) == {}


def test_a_full_file_is_read_typed_and_normalised() -> None:
    settings = parse(FULL)
    assert settings.component.jid == "queue.example.org"  # JIDs are compared normalised
    assert settings.component.server_host == "10.0.0.5"
    assert settings.component.server_port == 15347
    assert settings.database.url == "postgresql://xq:pw@db.internal/queue"
    assert settings.admins.jids == frozenset({"admin@example.org", "ops@example.org"})
    assert settings.logging.level == "DEBUG"
    assert settings.logging.file == Path("/var/log/xmpp-queue.log")
    assert dict(settings.pipeline) == {"master": "local[2]"}


def test_queue_defaults_become_the_config_of_new_nodes() -> None:
    config = parse(FULL).queue.node_config()
    assert config.queue_lock_timeout == 60
    assert config.queue_max_deliveries == 5
    assert config.queue_retry_delay == 2
    assert config.queue_retry_delay_max == 120
    assert config.max_payload_size == 65536
    assert config.queue is False  # a default, not a queue: creating a queue stays explicit


def test_settings_are_frozen() -> None:
    settings = parse(MINIMAL)
    with pytest.raises(AttributeError):
        settings.component.server_port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.pipeline["master"] = "x"  # type: ignore[index]


def test_the_example_file_in_the_repository_is_valid() -> None:
    settings = load_config(REPO / "config.example.toml")
    assert settings.source == REPO / "config.example.toml"
    assert settings.queue.node_config() == NodeConfig()  # it documents the real defaults
    assert settings.access.users == ("example.org",)  # the parent domain, as by default
    assert settings.database.url == DEFAULT_DATABASE_URL


# --- one error, naming the key ---------------------------------------------------------


def with_component(**values: str) -> str:
    lines = {"jid": '"queue.example.org"', "secret": '"s"', **values}
    return "[component]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items())


def test_a_wrong_type_names_the_key_what_is_expected_and_what_was_given() -> None:
    error = error_of(with_component(server_port='"abc"'))
    assert str(error) == 'component.server_port: expected an integer 1-65535, got "abc"'
    assert error.key == "component.server_port"


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    by_key(
        (with_component(server_port="70000"), "component.server_port", "1-65535, got 70000"),
        (with_component(server_port="true"), "component.server_port", "got true"),
        (with_component(server_port="53.5"), "component.server_port", "got 53.5"),
        (with_component(secret="42"), "component.secret", "expected a string, got 42"),
        (with_component(secret='"  "'), "component.secret", "non-empty"),
        (with_component(server_host='"a host"'), "component.server_host", "host name or IP"),
        (MINIMAL + "[queue]\ndefault_lock_timeout = 0\n", "queue.default_lock_timeout", "1-604800"),
        (MINIMAL + "[queue]\ndefault_max_deliveries = -1\n", "queue.default_max_deliveries", "0-"),
        (MINIMAL + "[queue]\nmax_payload_size = 0\n", "queue.max_payload_size", "1-16777216"),
        (
            MINIMAL + "[database]\nbacklog_memory_mb = -1\n",
            "database.backlog_memory_mb",
            "0-1048576",
        ),
        (
            MINIMAL + "[queue]\ndefault_retry_delay = 900\n",
            "queue.default_retry_delay",
            "must not exceed queue.default_retry_delay_max (600)",
        ),
        (MINIMAL + '[logging]\nlevel = "LOUD"\n', "logging.level", "expected one of DEBUG"),
        (MINIMAL + "[logging]\nfile = 3\n", "logging.file", "expected a string"),
        (MINIMAL + '[admins]\njids = "admin@example.org"\n', "admins.jids", "an array"),
    ),
)
def test_a_bad_value_names_its_key(text: str, key: str, expected: str) -> None:
    error = error_of(text)
    assert error.key == key
    assert str(error).startswith(f"{key}: ")
    assert expected in str(error)


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    by_key(
        (with_component(jid='"bad jid"'), "component.jid", "not a valid JID"),
        (with_component(jid='"queue@example.org"'), "component.jid", "a domain JID"),
        (with_component(jid='"example.org/res"'), "component.jid", "a domain JID"),
        (
            MINIMAL + '[admins]\njids = ["admin@example.org", "not a jid@@"]\n',
            "admins.jids[1]",
            "not a valid JID",
        ),
        (MINIMAL + '[admins]\njids = ["admin@example.org/phone"]\n', "admins.jids[0]", "bare JID"),
        (MINIMAL + '[admins]\njids = ["example.org"]\n', "admins.jids[0]", "bare JID"),
    ),
)
def test_a_bad_jid_names_its_key(text: str, key: str, expected: str) -> None:
    error = error_of(text)
    assert error.key == key
    assert expected in str(error)


def test_an_unknown_key_is_named_with_a_suggestion() -> None:
    error = error_of(with_component(sever_port="5347"))
    assert error.key == "component.sever_port"
    assert 'did you mean "server_port"?' in str(error)
    assert "jid, secret, server_host, server_port" in str(error)


def test_an_unknown_section_is_named() -> None:
    error = error_of(MINIMAL + "[databse]\nurl = 'sqlite:///x'\n")
    assert error.key == "databse"
    assert "unknown section" in str(error) and 'did you mean "database"?' in str(error)


def test_a_section_that_is_not_a_table_is_named() -> None:
    error = error_of("queue = 5\n" + MINIMAL)
    assert str(error) == "queue: expected a table [queue], got 5"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[component]\njid = "queue.example.org"\n', "component.secret"),
        ('[component]\nsecret = "s"\n', "component.jid"),
        ('[database]\nurl = "sqlite:///x"\n', "component"),
    ],
    ids=["component.secret", "component.jid", "component"],
)
def test_a_missing_required_key_is_named(text: str, key: str) -> None:
    error = error_of(text)
    assert error.key == key
    assert "missing" in str(error)


def test_a_bad_database_url_is_named_without_echoing_its_password() -> None:
    error = error_of(MINIMAL + '[database]\nurl = "mysql://root:hunter2@db/queue"\n')
    assert error.key == "database.url"
    assert 'got scheme "mysql"' in str(error)
    assert "hunter2" not in str(error)


@pytest.mark.parametrize("url", ["sqlite://x", "sqlite://host/x.db", "sqlite+aiosqlite://x"])
def test_a_sqlite_url_with_two_slashes_is_refused_before_migrate(url: str) -> None:
    """Issue 24: sqlite://x passed check-config, then migrate failed with exit 1."""
    error = error_of(MINIMAL + f'[database]\nurl = "{url}"\n')
    assert error.key == "database.url"
    assert "three slashes" in str(error)


@pytest.mark.parametrize(
    "url", ["postgresql://u:hunter2@h:notaport/db", "postgresql://u@h:99999/db"]
)
def test_a_database_url_with_a_bad_port_is_refused_before_migrate(url: str) -> None:
    """Like sqlite://x (issue 24): check-config passed it, migrate failed with exit 1."""
    error = error_of(MINIMAL + f'[database]\nurl = "{url}"\n')
    assert error.key == "database.url"
    assert "port" in str(error) and "hunter2" not in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///relative.sqlite",
        "sqlite:////abs/path.sqlite",
        "sqlite+aiosqlite:///x.db",
        "postgresql://u@h/db",
        "postgresql+asyncpg://u:p@h:5432/db",
        "postgres://u@h/db",
    ],
)
def test_sqlite_and_postgresql_urls_are_accepted(url: str) -> None:
    assert parse(MINIMAL + f'[database]\nurl = "{url}"\n').database.url == url


# --- the file itself -------------------------------------------------------------------


def test_a_missing_file_is_one_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.one_line().startswith(f"{path}: no such file")


def test_a_file_that_is_not_toml_is_one_error_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[component]\njid = "queue.example.org\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    line = caught.value.one_line()
    assert line.startswith(f"{path}: not valid TOML") and "line 2" in line


def test_an_error_in_a_file_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(with_component(server_port='"abc"'))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.one_line() == (
        f'{path}: component.server_port: expected an integer 1-65535, got "abc"'
    )
    assert "\n" not in caught.value.one_line()


# --- [access] and [limits] ---------------------------------------------------------------


def test_access_defaults_to_the_parent_domain_for_use_and_creation() -> None:
    from xmpp_queue.app.core_inputs import service_settings
    from xmpp_queue.core.model import AccessModel, Actor

    settings = parse(MINIMAL)
    assert settings.access.users == ("example.org",)
    assert settings.access.create == ("example.org",)
    core = service_settings(settings)
    assert core.access.admits(Actor("alice@example.org/a"), frozenset())
    assert not core.access.admits(Actor("eve@elsewhere.example/a"), frozenset())
    assert core.queue_access_model is AccessModel.WHITELIST
    assert core.default_config.access_model is AccessModel.OPEN
    assert core.defaults_for(True).access_model is AccessModel.WHITELIST
    assert core.limits.max_nodes_per_jid == 100 and core.limits.publish_rate == 1000
    assert core.default_config.queue_max_deliveries == 10
    assert core.default_config.queue_retry_delay == 1


def test_access_opened_to_the_federation_with_creation_kept_local() -> None:
    from xmpp_queue.app.core_inputs import service_settings
    from xmpp_queue.core.model import Actor

    settings = parse(
        MINIMAL
        + '[access]\nusers = ["*"]\nqueue_access_model = "open"\nexpose_publishers = true\n'
        + "[limits]\nmax_nodes_per_jid = 0\npublish_rate = 50\npublish_burst = 100\n"
        + 'rate_exempt = ["loader@example.org"]\n'
    )
    core = service_settings(settings)
    assert core.limits.rate_exempt == frozenset({"loader@example.org"})
    stranger = Actor("eve@elsewhere.example/a")
    assert core.access.admits(stranger, frozenset())
    assert not core.access.may_create(stranger, frozenset())  # create stays the parent domain
    assert core.expose_publishers and core.queue_access_model == "open"
    assert (core.limits.max_nodes_per_jid, core.limits.publish_rate) == (0, 50)
    admins_only = service_settings(parse(MINIMAL + '[access]\ncreate = "admins"\n'))
    assert not admins_only.access.may_create(Actor("alice@example.org/a"), frozenset())
    users = service_settings(parse(MINIMAL + '[access]\nusers = ["*"]\ncreate = "users"\n'))
    assert users.access.may_create(stranger, frozenset())


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    by_key(
        ('users = "example.org"', "access.users", "expected an array"),
        ('users = ["a@example.org/res"]', "access.users[0]", "not a full JID"),
        ('create = "everyone"', "access.create", '"admins", "users"'),
        ('queue_access_model = "roster"', "access.queue_access_model", "open, whitelist"),
        ('expose_publishers = "yes"', "access.expose_publishers", "true or false"),
        ("publish_rate = -1", "limits.publish_rate", "expected an integer 0-"),
        ("max_queue_items = 1.5", "limits.max_queue_items", "expected an integer"),
        ("publish_burst = 0", "limits.publish_burst", "expected an integer 1-"),
        ("max_node = 3", "limits.max_node", 'did you mean "max_nodes_per_jid"'),
        ('rate_exempt = "a@example.org"', "limits.rate_exempt", "expected an array"),
    ),
)
def test_a_bad_access_or_limits_key_is_one_error_naming_it(
    text: str, key: str, expected: str
) -> None:
    section = "access" if key.startswith("access") else "limits"
    err = error_of(MINIMAL + f"[{section}]\n{text}\n")
    assert err.key == key and expected in err.problem, str(err)
