# The swarm backend's per-network relay (python3 -I, stdlib only; written for research-bench).
# Arguments: LISTEN_HOST:PORT=TARGET_HOST:PORT ... Each listener forwards TCP connections to its
# target (a name is resolved per connection, through the engine's DNS). Prints "ready" once
# every listener is bound. Errors on one connection never stop the relay.
import asyncio
import sys

CONNECT_TIMEOUT = 10
CHUNK = 65536


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, asyncio.IncompleteReadError, RuntimeError):
        pass


def close(writer):
    try:
        writer.close()
    except (OSError, RuntimeError):
        pass


def handler(host, port):
    async def handle(reader, writer):
        try:
            t_reader, t_writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), CONNECT_TIMEOUT
            )
        except (OSError, asyncio.TimeoutError):
            close(writer)
            return
        try:
            await asyncio.gather(pipe(reader, t_writer), pipe(t_reader, writer))
        finally:
            close(t_writer)
            close(writer)

    return handle


def split(hostport):
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


async def main(specs):
    servers = []
    for spec in specs:
        listen, target = spec.split("=", 1)
        l_host, l_port = split(listen)
        t_host, t_port = split(target)
        servers.append(
            await asyncio.start_server(handler(t_host, t_port), l_host, l_port, reuse_address=True)
        )
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
