"""Drives `green-agent serve` with the official a2a-sdk 1.x client (run with `.venv`).

Usage: serve_client.py BASE_URL REQUEST_JSON stream|poll. Sends the assessment request as a
data part, follows the task to a terminal state (the SendStreamingMessage events, or GetTask
polls), reads the final task with GetTask and prints one JSON object on the last stdout line:
states, every status text seen, the trial artifacts' data, the `result` data part and the
names of every artifact.
"""

import asyncio
import json
import sys

from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


def status_text(status):
    return " ".join(p.text for p in status.message.parts if p.WhichOneof("content") == "text")


def data_of(artifact):
    for p in artifact.parts:
        if p.WhichOneof("content") == "data":
            return MessageToDict(p.data)
    return None


async def main(base_url, request, mode):
    out = {"mode": mode, "statuses": [], "streamed_trials": 0}
    client = await create_client(
        base_url, client_config=ClientConfig(streaming=(mode == "stream"), polling=(mode == "poll"))
    )
    data = Value()
    data.struct_value.update(json.loads(request))
    message = Message(message_id="serve-e2e-1", role=Role.ROLE_USER, parts=[Part(data=data)])
    req = SendMessageRequest(message=message)
    req.configuration.return_immediately = True
    task_id = None
    state = None
    async for event in client.send_message(req):
        if event.HasField("task"):
            task_id = event.task.id
            state = event.task.status.state
            out.setdefault("first_state", TaskState.Name(state))
        elif event.HasField("status_update"):
            state = event.status_update.status.state
            out["statuses"].append(status_text(event.status_update.status))
        elif event.HasField("artifact_update"):
            if event.artifact_update.artifact.name.startswith("trial:"):
                out["streamed_trials"] += 1
        elif event.HasField("message"):
            raise RuntimeError(f"expected a task, got a message: {event}")
        if mode == "poll":
            break
    polls = 0
    while state not in TERMINAL and polls < 3000:
        await asyncio.sleep(0.2)
        task = await client.get_task(GetTaskRequest(id=task_id))
        state = task.status.state
        text = status_text(task.status)
        if not out["statuses"] or out["statuses"][-1] != text:
            out["statuses"].append(text)
        polls += 1
    task = await client.get_task(GetTaskRequest(id=task_id))
    out["task_id"] = task_id
    out["final_state"] = TaskState.Name(task.status.state)
    out["final_status"] = status_text(task.status)
    out["artifacts"] = [a.name for a in task.artifacts]
    out["trials"] = [data_of(a) for a in task.artifacts if a.name.startswith("trial:")]
    out["result"] = next((data_of(a) for a in task.artifacts if a.name == "result"), None)
    out["run_id"] = MessageToDict(task.metadata).get("run_id")
    await client.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
