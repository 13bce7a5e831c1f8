"""An external A2A agent on the official a2a-sdk 1.x, with one behaviour per mode, for the
green agent's e2e tests (tests/tests/agent_behaviours.rs, reattach.rs).

Usage: sdk_agent.py MODE COUNT_FILE. Binds 127.0.0.1 on a free port, prints `PORT <n>`, serves
until killed; appends one line to COUNT_FILE each time it starts working on a message. The task
asks for `out.txt` holding `done`. Modes:
- block: ignores returnImmediately: answers SendMessage only after 60 s of work, then completes.
- stream-only: the card says it streams; SendMessage is refused (-32004); streams complete.
- failed / rejected: ends FAILED / REJECTED with a status message saying why.
- input-once: asks a question (INPUT_REQUIRED), completes after the reply.
- input-twice: asks again after the reply.
- message: answers with a Message (no task) carrying `out.txt` as a raw part.
- unnamed: completes with `out.txt` and a text artifact without a file name (no `answer`).
- slow: works 12 s before it completes (the green agent is killed meanwhile: reattach.rs).
- auth: its card declares a bearer scheme; every JSON-RPC request without
  `Authorization: Bearer e2e-secret-token` is answered HTTP 401; with it, it completes.
"""

import asyncio
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from a2a.utils.errors import UnsupportedOperationError

MODE = sys.argv[1]
COUNT_FILE = sys.argv[2]
OUT = Part(raw=b"done\n", filename="out.txt", media_type="text/plain")


def count():
    with open(COUNT_FILE, "a") as f:
        f.write("start\n")


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        current = context.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            updater = TaskUpdater(event_queue, current.id, current.context_id)
            if MODE == "input-twice":
                await updater.requires_input(
                    new_text_message("I still need the output format", current.context_id, current.id)
                )
                return
            await updater.start_work()
            await updater.add_artifact([OUT], name="out.txt")
            await updater.complete()
            return
        count()
        if MODE == "message":
            await event_queue.enqueue_event(
                Message(
                    message_id="answer-1",
                    role=Role.ROLE_AGENT,
                    context_id=context.context_id,
                    parts=[Part(text="here is the file"), OUT],
                )
            )
            return
        if MODE == "block":
            await asyncio.sleep(60)
        task = current or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        msg = lambda text: new_text_message(text, task.context_id, task.id)  # noqa: E731
        if MODE == "failed":
            await updater.failed(msg("I could not find the input data"))
            return
        if MODE == "rejected":
            await updater.reject(msg("I only work on astronomy tasks"))
            return
        if MODE.startswith("input"):
            await updater.requires_input(msg("Which output format do you want?"))
            return
        await asyncio.sleep(12 if MODE == "slow" else 0.5)
        await updater.add_artifact([OUT], name="out.txt")
        if MODE == "unnamed":
            await updater.add_artifact([Part(text="the output is in out.txt")], name="notes")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


async def require_token(request, call_next):
    if request.method == "POST" and request.headers.get("authorization") != "Bearer e2e-secret-token":
        return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
    return await call_next(request)


class StreamOnly(DefaultRequestHandler):
    async def on_message_send(self, params, context):
        raise UnsupportedOperationError(message="this agent only serves SendStreamingMessage")


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    card = AgentCard(
        name=f"sdk-{MODE}",
        description="a2a-sdk agent for the green agent's e2e tests",
        version="0.0.1",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=MODE == "stream-only", push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="e2e", name="e2e", description="test skill", tags=["test"])],
    )
    if MODE == "auth":
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList(list=[])}))
    handler_class = StreamOnly if MODE == "stream-only" else DefaultRequestHandler
    handler = handler_class(agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/"))
    if MODE == "auth":
        app.add_middleware(BaseHTTPMiddleware, dispatch=require_token)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    print(f"PORT {port}", flush=True)
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    sys.exit(main())
