"""A Triton generate client written the way users write one with requests.

Usage: triton_client.py generate_stream URL BODY  -- read the SSE stream
       triton_client.py generate URL BODY         -- read the JSON reply
       triton_client.py health BASE MODEL         -- the checks tritonclient makes

Prints what it read, one fact per line, for the Go test to compare.
"""
import json
import sys

import requests


def generate_stream(url, body):
    with requests.post(url, data=body.encode("utf-8"), stream=True, timeout=30) as r:
        print("status:", r.status_code, r.headers.get("Content-Type"))
        if "text/event-stream" not in r.headers.get("Content-Type", ""):
            print("error:", r.json()["error"])
            return
        text = []
        # As genai-perf and most scripts do: one "data:" line per response,
        # and always check for an error object (the status is already 200).
        for line in r.iter_lines():
            if not line.startswith(b"data:"):
                continue
            obj = json.loads(line[len(b"data:"):])
            if "error" in obj:
                print("error:", obj["error"])
                break
            text.append(obj["text_output"])
            print("delta:", json.dumps(obj["text_output"], ensure_ascii=False))
        print("text:", json.dumps("".join(text), ensure_ascii=False))


def generate(url, body):
    r = requests.post(url, json=json.loads(body), timeout=30)
    print("status:", r.status_code, r.headers.get("Content-Type"))
    print("reply:", json.dumps(r.json(), ensure_ascii=False, sort_keys=True))


def health(base, model):
    print("live:", requests.get(base + "/v2/health/live", timeout=10).status_code == 200)
    print("ready:", requests.get(base + "/v2/health/ready", timeout=10).status_code == 200)
    print("model ready:", requests.get(base + "/v2/models/" + model + "/ready", timeout=10).status_code == 200)
    print("unknown ready:", requests.get(base + "/v2/models/no-such-model/ready", timeout=10).status_code == 200)
    md = requests.get(base + "/v2/models/" + model, timeout=10).json()
    print("metadata:", md["name"], md["versions"], [i["name"] for i in md["inputs"]][:3])
    print("extensions:", requests.get(base + "/v2", timeout=10).json()["extensions"])


if __name__ == "__main__":
    {"generate_stream": generate_stream, "generate": generate, "health": health}[sys.argv[1]](*sys.argv[2:])
