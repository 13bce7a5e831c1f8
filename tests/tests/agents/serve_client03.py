"""Drives `green-agent serve` with the official a2a-sdk 0.3.x client, AgentBeats' version (run
with `.venv-a2a03`).

Usage: serve_client03.py BASE_URL REQUEST_JSON stream|poll. Same observations, same output
shape as serve_client.py.
"""

import asyncio
import json
import sys

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    DataPart,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
)

TERMINAL = {TaskState.completed, TaskState.failed, TaskState.canceled, TaskState.rejected}


def status_text(status):
    if status.message is None:
        return ""
    return " ".join(p.root.text for p in status.message.parts if p.root.kind == "text")


def data_of(artifact):
    for p in artifact.parts:
        if p.root.kind == "data":
            return p.root.data
    return None


async def main(base_url, request, mode):
    out = {"mode": mode, "statuses": [], "streamed_trials": 0}
    async with httpx.AsyncClient(timeout=120) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        out["card_protocol_version"] = card.protocol_version
        config = ClientConfig(streaming=(mode == "stream"), polling=(mode == "poll"), httpx_client=http)
        client = ClientFactory(config).create(card)
        msg = Message(
            role=Role.user,
            message_id="serve-e2e-03",
            parts=[Part(root=DataPart(data=json.loads(request)))],
        )
        task = None
        async for event in client.send_message(msg):
            if isinstance(event, Message):
                raise RuntimeError(f"expected a task, got a message: {event}")
            task, update = event
            out.setdefault("first_state", task.status.state.value)
            if isinstance(update, TaskStatusUpdateEvent):
                out["statuses"].append(status_text(update.status))
            elif isinstance(update, TaskArtifactUpdateEvent):
                if (update.artifact.name or "").startswith("trial:"):
                    out["streamed_trials"] += 1
        polls = 0
        while task.status.state not in TERMINAL and polls < 3000:
            await asyncio.sleep(0.2)
            task = await client.get_task(TaskQueryParams(id=task.id))
            text = status_text(task.status)
            if not out["statuses"] or out["statuses"][-1] != text:
                out["statuses"].append(text)
            polls += 1
        task = await client.get_task(TaskQueryParams(id=task.id))
        out["task_id"] = task.id
        out["final_state"] = task.status.state.value
        out["final_status"] = status_text(task.status)
        out["artifacts"] = [a.name for a in task.artifacts or []]
        out["trials"] = [data_of(a) for a in task.artifacts or [] if (a.name or "").startswith("trial:")]
        out["result"] = next((data_of(a) for a in task.artifacts or [] if a.name == "result"), None)
        out["run_id"] = (task.metadata or {}).get("run_id")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
