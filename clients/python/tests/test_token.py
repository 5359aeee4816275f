"""A server that requires a token: the client sends it as a bearer token, streams included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infinity_client import Client, InfinityError

from .conftest import Serve, start_serve, stop_serve
from .helpers import Reader, of_type

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    home = tmp_path_factory.mktemp("guarded")
    (home / "script.yaml").write_text('rules:\n  - reply: {text: "guarded ok"}\n')
    (home / "agent.yaml").write_text("name: guard\nmodel: script:script.yaml\n")
    serve = start_serve(home / "agent.yaml", home / "store", home / "serve.log", [], token=TOKEN)
    yield serve
    stop_serve(serve)


def test_the_token_is_sent_with_every_request(guarded: Serve) -> None:
    with Client(guarded.base_url) as anonymous:
        with pytest.raises(InfinityError) as refused:
            anonymous.list_threads()
        assert refused.value.status == 401
        with pytest.raises(InfinityError) as stream_refused:
            next(anonymous.events("t1", after=0))
        assert stream_refused.value.status == 401

    with Client(guarded.base_url, token="wrong") as wrong:
        with pytest.raises(InfinityError) as refused:
            wrong.agents()
        assert refused.value.status == 401

    with Client(guarded.base_url, token=TOKEN) as client:
        client.send_message("t1", "hi")
        reader = Reader(client.events("t1", after=0))
        reader.until(of_type("assistant_text", text="guarded ok"), "the reply")
        assert [t.id for t in client.iter_threads()] == ["t1"]
