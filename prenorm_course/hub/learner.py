"""A learner at the hub's front door, as a browser is: the login form, the spawn page, the link, the notebook.

:class:`Learner` speaks plain HTTP with cookies, exactly what a browser sends: it opens the
nbgitpuller link, is sent to the login form, posts its Unix password with the form's
``_xsrf`` cookie, waits on the spawn page until its server answers, lets nbgitpuller pull the
course, runs a notebook's cells in a kernel of its own server over the kernel's websocket
(JupyterLab's protocol, authenticated by the same cookies) and saves the notebook through
the contents API with the ``X-XSRFToken`` header JupyterLab sends. No token, no REST call a
browser would not make. The hub test and the class benchmark (:mod:`.class_bench`) use it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from urllib.parse import parse_qs, urlparse

import requests
from tornado import httpclient, websocket

from prenorm_course.hub.config import COURSE_FOLDER


class LoginRefused(RuntimeError):
    """The hub's form did not let the learner in."""


def kernel_message(frame: str | bytes) -> dict:
    """One kernel message from the websocket: JSON text, or (a message with buffers, e.g. a widget's)
    jupyter_server's binary frame: a count, offsets, then the JSON message and its buffers."""
    if isinstance(frame, str):
        return json.loads(frame)
    count = int.from_bytes(frame[:4], "big")
    offsets = [int.from_bytes(frame[4 + 4 * i:8 + 4 * i], "big") for i in range(count)]
    return json.loads(frame[offsets[0]:offsets[1] if count > 1 else None])


async def run_cells(ws_url: str, headers: dict, sources: list[str], timeout: float = 300) -> list[list[dict]]:
    """Run ``sources`` in the kernel behind ``ws_url`` as JupyterLab does; the outputs of each (nbformat)."""
    request = httpclient.HTTPRequest(ws_url, headers=headers)
    conn = await websocket.websocket_connect(request, max_message_size=256 * 2**20)
    session, results = uuid.uuid4().hex, []
    try:
        for source in sources:
            msg_id = uuid.uuid4().hex
            conn.write_message(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session, "username": "",
                           "version": "5.3", "date": ""},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": True}}))
            outputs, idle, replied = [], False, False
            while not (idle and replied):
                frame = await asyncio.wait_for(conn.read_message(), timeout)
                if frame is None:
                    raise ConnectionError("the kernel's websocket closed (the kernel died?)")
                msg = kernel_message(frame)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = msg["header"]["msg_type"], msg["content"]
                if msg["channel"] == "shell" and kind == "execute_reply":
                    replied = True
                elif kind == "status" and content["execution_state"] == "idle":
                    idle = True
                elif kind == "stream":
                    outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
                elif kind in ("display_data", "execute_result"):
                    output = {"output_type": kind, "data": content["data"], "metadata": content.get("metadata", {})}
                    if kind == "execute_result":
                        output["execution_count"] = content["execution_count"]
                    outputs.append(output)
                elif kind == "error":
                    outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                                    "traceback": content["traceback"]})
            results.append(outputs)
    finally:
        conn.close()
    return results


class Learner:
    """One learner's browser session on the hub at ``base`` (e.g. http://127.0.0.1:8000)."""

    def __init__(self, base: str, name: str, password: str):
        self.base, self.name, self.password = base.rstrip("/"), name, password
        self.http = requests.Session()
        self.prefix = f"{self.base}/user/{name}"

    def open_link(self, link: str, wait: float = 900) -> requests.Response:
        """Click the link: log in through the form (unless this browser is logged in already), wait for the
        server, land on nbgitpuller's page."""
        page = self.http.get(link, timeout=300)
        next_url = link
        if "/hub/login" in urlparse(page.url).path:
            login = page
            form = {"username": self.name, "password": self.password,
                    "_xsrf": self.http.cookies.get("_xsrf", path="/hub/")}
            page = self.http.post(login.url, data=form, timeout=300)
            if page.status_code != 200 or "/hub/login" in urlparse(page.url).path:
                raise LoginRefused(f"{self.name}: the login form answered {page.status_code} at {page.url}")
            next_url = parse_qs(urlparse(login.url).query).get("next", [link])[0]
            next_url = self.base + next_url if next_url.startswith("/") else next_url
        deadline = time.monotonic() + wait
        while urlparse(page.url).path != f"/user/{self.name}/git-pull":  # the spawn page, until the server answers
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: the server had not started {wait:.0f} s after login ({page.url})")
            if "spawn-pending" not in page.url and "/hub/" not in page.url:
                raise RuntimeError(f"{self.name}: unexpected page {page.status_code} {page.url}")
            time.sleep(1)
            page = self.http.get(next_url, timeout=300)
        return page

    def pull(self, page: requests.Response) -> str:
        """nbgitpuller's own pull, which the page the link opens streams; returns its log."""
        query = {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items() if k in ("repo", "branch")}
        query["targetpath"] = COURSE_FOLDER
        response = self.http.get(f"{self.prefix}/git-pull/api", params=query, stream=True, timeout=600)
        response.raise_for_status()
        log = []
        for line in response.iter_lines(decode_unicode=True):
            if line.startswith("data:"):
                event = json.loads(line[5:])
                log.append(event.get("output", "") or event.get("message", ""))
                if event.get("phase") in ("finished", "error"):
                    if event["phase"] != "finished":
                        raise RuntimeError(f"{self.name}: nbgitpuller failed:\n" + "".join(log))
                    break
        # Then the browser opens the notebook in JupyterLab (which also gives it the _xsrf cookie).
        urlpath = parse_qs(urlparse(page.url).query).get("urlpath", ["lab"])[0]
        self.http.get(f"{self.prefix}/{urlpath}", timeout=300).raise_for_status()
        return "".join(log)

    def _xsrf(self) -> dict:
        token = self.http.cookies.get("_xsrf", path=f"/user/{self.name}/")
        return {"X-XSRFToken": token} if token else {}

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        response = self.http.request(method, f"{self.prefix}/api/{path}", headers=self._xsrf(), timeout=300, **kwargs)
        if response.status_code >= 400:
            raise RuntimeError(f"{self.name}: {method} {path}: {response.status_code} {response.text[:300]}")
        return response

    def read_notebook(self, path: str) -> dict:
        return self.api("GET", f"contents/{path}").json()["content"]

    def run(self, notebook: dict, timeout: float = 300) -> dict:
        """Run every code cell of ``notebook`` in a new kernel of this learner's server (left running, as a
        browser tab leaves it); the notebook with its outputs."""
        kernel = self.api("POST", "kernels", json={"name": "python3"}).json()["id"]
        cookies = "; ".join(f"{c.name}={c.value}" for c in self.http.cookies
                            if c.path in ("/", f"/user/{self.name}/", f"/user/{self.name}"))
        ws = self.prefix.replace("http", "ws", 1) + f"/api/kernels/{kernel}/channels"
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        outputs = asyncio.run(run_cells(ws, {"Cookie": cookies, **self._xsrf()},
                                        ["".join(c["source"]) for c in code], timeout))
        for cell, out in zip(code, outputs, strict=True):
            cell["outputs"] = out
        return notebook

    def save(self, path: str, notebook: dict) -> None:
        self.api("PUT", f"contents/{path}", json={"type": "notebook", "format": "json", "content": notebook})
