#!/usr/bin/env python3
"""halformer serve under SIGTERM and a restart, with clients running.

    check_serve.py HALFORMER MODEL_DIR

16 clients send requests (a new connection each) while the server is sent
SIGTERM; it must exit 0 after answering every request it accepted: each
response that began (a status line) must be complete, 200 with an answer or
503 with an error. Connections refused or reset before any byte count as not
accepted. Then the server is started again on the same port, the clients
(still running, retrying) must be answered again, and a second SIGTERM must
stop it cleanly. Loopback only; bounded loops.
"""
import http.client
import json
import socket
import subprocess
import sys
import threading
import time

exe, model = sys.argv[1], sys.argv[2]
TEXTS = ["Open the file.", "Show hidden files", "Save the document before you close the program.",
         "Where is the nearest train station?", "Copy", "The printer is not connected to the computer."]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


PORT = free_port()
lock = threading.Lock()
counts = {"ok": 0, "busy": 0, "not_accepted": 0, "broken": 0}
broken = []
stop = threading.Event()


def client(i):
    k = 0
    while not stop.is_set():
        body = {"text": TEXTS[(i + k) % len(TEXTS)]}
        if k % 3 == 1:
            body.update(beam=4)
        k += 1
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
        try:
            conn.request("POST", "/v1/generate", json.dumps(body), {"Connection": "close"})
        except OSError:
            with lock:
                counts["not_accepted"] += 1
            time.sleep(0.02)
            continue
        try:
            resp = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError):
            with lock:
                counts["not_accepted"] += 1  # closed before any byte of an answer
            continue
        try:
            data = resp.read()
            answer = json.loads(data)
            if resp.status == 200 and "ids" in answer and "text" in answer and "error" not in answer:
                key = "ok"
            elif resp.status == 503 and "error" in answer:
                key = "busy"
            else:
                key = "broken"
        except Exception as e:  # an answer that began and did not finish
            key, answer = "broken", repr(e)
        with lock:
            counts[key] += 1
            if key == "broken":
                broken.append((resp.status, answer))
        conn.close()


def start():
    p = subprocess.Popen([exe, "serve", model, "--port", str(PORT), "--threads", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "on http://" not in line:
        sys.exit("the server did not start: " + line + p.stderr.read())
    return p


def sigterm(p, phase):
    time.sleep(1.5)
    before = dict(counts)
    p.terminate()
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        sys.exit(f"{phase}: the server did not exit within 120 s of SIGTERM")
    err = p.stderr.read()
    print(f"[serve] {phase}: SIGTERM after {before['ok']} answers; exit code {rc}; {err.strip().splitlines()[-1]}")
    if rc != 0 or "stopped" not in err:
        sys.exit(f"{phase}: exit code {rc}, stderr:\n{err}")


server = start()
threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
sigterm(server, "under load")
ok_first = counts["ok"]
time.sleep(0.5)  # clients are refused meanwhile
server = start()
time.sleep(1.0)
sigterm(server, "after a restart")
stop.set()
for t in threads:
    t.join(timeout=120)
print(f"[serve] answers {counts['ok']} (before the restart {ok_first}), 503 {counts['busy']}, "
      f"not accepted {counts['not_accepted']}, broken {counts['broken']}")
if counts["broken"]:
    sys.exit(f"accepted requests lost or cut: {broken[:5]}")
if ok_first == 0 or counts["ok"] <= ok_first:
    sys.exit("no answers before SIGTERM, or none after the restart")

# Idle keep-alive clients do not hold SIGTERM back (they held it for the
# idle timeout, 10 s): the server exits at once and each of them sees the close.
server = start()
idle = []
for i in range(10):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    conn.request("POST", "/v1/generate", body=json.dumps({"text": "Open the file."}),
                 headers={"Content-Type": "application/json"})
    if conn.getresponse().read() is None:
        sys.exit("no answer")
    idle.append(conn)
t0 = time.monotonic()
server.terminate()
rc = server.wait(timeout=60)
took = time.monotonic() - t0
print(f"[serve] SIGTERM with 10 idle keep-alive connections: exit code {rc} after {took:.2f} s")
if rc != 0 or took > 3:
    sys.exit(f"SIGTERM with idle keep-alive connections: exit code {rc} after {took:.1f} s (at most 3 s)")
for conn in idle:
    conn.close()
print("[serve] PASS")
