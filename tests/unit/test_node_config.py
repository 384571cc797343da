"""The config field table: parsing, validation, preconditions, subscribe options."""

from __future__ import annotations

import pytest

from xmpp_queue.core.errors import InvalidNodeConfig, InvalidOptions, PreconditionNotMet
from xmpp_queue.core.model import AccessModel, NodeConfig
from xmpp_queue.core.node_config import apply_config, check_preconditions, config_values
from xmpp_queue.core.subscribe_options import parse_subscribe_options


def test_apply_config_parses_typed_values_and_keeps_omitted_ones() -> None:
    cfg = apply_config(
        NodeConfig(title="keep"),
        {
            "FORM_TYPE": ["x"],
            "pubsub#max_items": ["max"],
            "pubsub#access_model": ["whitelist"],
            "pubsub#queue": ["true"],
            "pubsub#queue_lock_timeout": ["30"],
        },
    )
    assert cfg.title == "keep"
    assert cfg.max_items is None
    assert cfg.access_model is AccessModel.WHITELIST
    assert cfg.queue and cfg.queue_lock_timeout == 30


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pubsub#max_items", "-1"),
        ("pubsub#persist_items", "maybe"),
        ("pubsub#access_model", "roster"),
        ("pubsub#queue_lock_timeout", "0"),
        ("pubsub#no_such_option", "1"),
    ],
)
def test_bad_config_names_the_field(field: str, value: str) -> None:
    with pytest.raises(InvalidNodeConfig) as err:
        apply_config(NodeConfig(), {field: [value]})
    assert err.value.field == field


def test_foreign_fields_are_ignored() -> None:
    assert apply_config(NodeConfig(), {"x-custom#thing": ["1"]}) == NodeConfig()


def test_config_values_round_trip() -> None:
    cfg = NodeConfig(title="t", max_items=5, queue=True)
    assert apply_config(NodeConfig(), {k: [v] for k, v in config_values(cfg).items()}) == cfg


def test_preconditions_section_7_1_5() -> None:
    cfg = NodeConfig(access_model=AccessModel.WHITELIST)
    check_preconditions(cfg, {"pubsub#access_model": ["whitelist"]})
    with pytest.raises(PreconditionNotMet):
        check_preconditions(cfg, {"pubsub#access_model": ["open"]})


@pytest.mark.parametrize("value", ["0", "-3", "abc", "", "1.5", "100000"])
def test_queue_requests_must_be_a_positive_integer(value: str) -> None:
    with pytest.raises(InvalidOptions) as err:
        parse_subscribe_options({"pubsub#queue_requests": [value]})
    assert err.value.field == "pubsub#queue_requests"


def test_subscribe_options_merge_onto_current() -> None:
    first = parse_subscribe_options({"pubsub#queue_requests": ["5"]})
    second = parse_subscribe_options({"pubsub#deliver": ["0"]}, first)
    assert (second.queue_requests, second.deliver) == (5, False)
