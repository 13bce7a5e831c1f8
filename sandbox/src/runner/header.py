# The sandbox runner (python3 -I, stdlib only; written for research-bench). Two modes:
#
# HTTP (the swarm backend): runs as root in a swarm sandbox's container (the child of its
# init), starts the sandbox's own command as the sandbox user, and serves over HTTP what the
# host needs of the sandbox: files in (PUT /files, a tar), execs (POST /exec), files out
# (GET /files?path=, a tar), the main command's exit (GET /main), its output (GET /logs) and
# its stop (POST /stop). With --hold the main command waits for POST /start (the host copies
# the sandbox's files in first).
#   Arguments: --port N --token-file F --user SPEC [--workdir DIR] [--peer IP]
#              [--max-upload BYTES] [--home-set] [--hold] -- COMMAND...
#   Every request must carry "Authorization: Bearer <token>" (the token file is a root-only
#   Swarm secret); connections from any address but --peer (the relay) are closed unread.
#   Every read is bounded: header lines and count (http.server), bodies (Content-Length only,
#   capped), time (socket timeout), concurrent connections.
#
# --stdio [--home-set] (the docker backend's exec channel of an idle root container): execs
# only, one JSON request per line on stdin, one answer per line on stdout, each with the
# request's id; requests run concurrently. Only the host's attach reaches these pipes: the
# process is root's, so no other uid can open its /proc fds.
#
# Shipped as ONE program assembled by `sandbox/src/runner/mod.rs` (`program()`): this header,
# the constants the host shares (generated there, one source), then one file per job:
# process.py, exec.py, archive.py, transport_http.py, transport_stdio.py, main.py.
import ctypes
import grp
import hmac
import json
import os
import pwd
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer
