"""Start a conversation with an Infinity server and print the reply as it streams.

    infinity serve --agent examples/demo/agent.yaml     # any agent will do
    python examples/quickstart.py "Plan a launch party"

INFINITY_URL says where the server is (default http://127.0.0.1:8700), INFINITY_SERVE_TOKEN
its token when it needs one (not on a loopback address).
"""

from __future__ import annotations

import os
import sys
import uuid

from infinity_client import (
    Client,
    OutputEventAssistantDelta,
    OutputEventAssistantText,
    OutputEventToolCall,
)


def main() -> None:
    base_url = os.environ.get("INFINITY_URL", "http://127.0.0.1:8700")
    token = os.environ.get("INFINITY_SERVE_TOKEN")
    text = " ".join(sys.argv[1:]) or "hello"
    thread = f"quickstart-{uuid.uuid4().hex[:8]}"

    with Client(base_url, token=token) as client:
        client.send_message(thread, text)
        print(f"[{thread}] you: {text}")
        # after=0: from the thread's first event, so nothing is missed however fast it answers.
        # The stream reconnects by itself if the connection drops; leave it when done.
        with client.events(thread, after=0) as events:
            streamed = False
            for event in events:
                if isinstance(event, OutputEventAssistantDelta):
                    if not streamed:
                        print(f"[{thread}] agent: ", end="")
                    print(event.text, end="", flush=True)
                    streamed = True
                elif isinstance(event, OutputEventToolCall):
                    print(f"[{thread}] (calls {event.name})")
                elif isinstance(event, OutputEventAssistantText):
                    print("" if streamed else f"[{thread}] agent: {event.text}")
                    break

        record = client.get_thread(thread)
        print(
            f"[{thread}] {record.status.value}, {record.events} events, "
            f"{record.usage.completions} completion(s)"
        )


if __name__ == "__main__":
    main()
