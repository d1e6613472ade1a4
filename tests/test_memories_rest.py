"""The mem0-shaped REST routes (/v1/memories) and exact deletes, end to end in-process."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from test_server import ALPHA, add_ana_lee, client, drain  # noqa: E402, F401 - fixture


def test_memories_add_list_search_get_update_history_delete(client) -> None:  # noqa: F811
    body = {
        "messages": [
            {"role": "user", "content": "I live in Paris and I work as a nurse."},
            {"role": "user", "content": "I have a dog called Rex."},
        ],
        "user_id": "alice",
        "metadata": {"source": "onboarding"},
    }
    added = client.post("/v1/memories", json=body, headers=ALPHA)
    assert added.status_code == 200, added.text
    assert {r["event"] for r in added.json()["results"]} == {"ADD"}
    client.post(
        "/v1/memories", json={"messages": "I drive a blue Fiat.", "user_id": "alice"}, headers=ALPHA
    )
    listed = client.get("/v1/memories", params={"user_id": "alice"}, headers=ALPHA).json()
    home = next(r for r in listed["results"] if "Paris" in r["memory"])
    assert home["metadata"] == {"source": "onboarding"}
    only = client.get(
        "/v1/memories",
        params={"user_id": "alice", "filters": '{"source": "onboarding"}'},
        headers=ALPHA,
    ).json()["results"]
    assert only and not any("Fiat" in r["memory"] for r in only)
    found = client.get("/v1/memories", params={"user_id": "alice", "q": "dog"}, headers=ALPHA)
    top = found.json()["results"]
    assert "Rex" in top[0]["memory"]
    assert [r["score"] for r in top] == sorted((r["score"] for r in top), reverse=True)
    posted = client.post(
        "/v1/memories/search",
        json={"query": "dog", "user_id": "alice", "limit": 1},
        headers=ALPHA,
    ).json()["results"]
    assert [r["id"] for r in posted] == [top[0]["id"]]
    one = client.get(f"/v1/memories/{home['id']}", headers=ALPHA).json()
    assert one == home  # one shape: the item get_all lists
    fixed = client.put(
        f"/v1/memories/{home['id']}", json={"text": "alice lives in Lyon."}, headers=ALPHA
    )
    assert fixed.status_code == 200
    assert fixed.json()["memory"] == "alice lives in Lyon." and fixed.json()["id"] == home["id"]
    wrong = client.put(f"/v1/memories/{home['id']}", json={"kind": "mood"}, headers=ALPHA)
    assert wrong.status_code == 400 and "kind must be one of" in wrong.json()["error"]["message"]
    dated = client.put(  # beyond mem0: the span it holds, kind and subject too
        f"/v1/memories/{home['id']}", json={"valid_from": "2024-01-01"}, headers=ALPHA
    )
    assert dated.status_code == 200 and dated.json()["memory"] == "alice lives in Lyon."
    history = client.get(f"/v1/memories/{home['id']}/history", headers=ALPHA).json()
    assert [(e["event"], e["memory_id"]) for e in history] == [
        ("ADD", home["id"]),
        ("UPDATE", home["id"]),
        ("UPDATE", home["id"]),
    ]
    gone = client.delete(f"/v1/memories/{home['id']}", headers=ALPHA)
    assert gone.json() == {"message": "Memory deleted successfully!"}
    (audit, *_) = client.get("/v1/memory/audit", headers=ALPHA).json()
    assert (audit["kind"], audit["claims"]) == ("claim", 3) and audit["actor"].startswith("rest")
    missing = client.get(f"/v1/memories/{home['id']}", headers=ALPHA)
    assert missing.status_code == 404 and "no memory" in missing.json()["error"]["message"]
    after = client.get(f"/v1/memories/{home['id']}/history", headers=ALPHA).json()
    assert [e["event"] for e in after] == ["ADD", "UPDATE", "UPDATE", "DELETE"]
    bad = client.get("/v1/memories", params={"filters": "[1]"}, headers=ALPHA)
    assert bad.status_code == 400 and "JSON object" in bad.json()["error"]["message"]


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("get", "/v1/memories/424242", 404),
        ("put", "/v1/memories/424242", 404),
        ("delete", "/v1/memories/424242", 404),
        ("get", "/v1/memories/424242/history", 404),
        ("get", "/v1/memories/abc", 400),
        ("delete", "/v1/memory/messages/ana-lee/nope", 404),
    ],
)
def test_unknown_ids_are_one_line_errors(client, method, path, status) -> None:  # noqa: F811
    kw = {"json": {"text": "x"}} if method == "put" else {}
    r = getattr(client, method)(path, headers=ALPHA, **kw)
    assert r.status_code == status, r.text
    assert "\n" not in r.json()["error"]["message"]


def test_forget_message_person_received_and_reset(client) -> None:  # noqa: F811
    add_ana_lee(client)
    drain(client)
    r = client.delete("/v1/memory/messages/ana-lee/D1:1", headers=ALPHA)
    assert r.status_code == 200 and r.json() == {"deleted": 1}
    hits = client.get("/v1/memory/search", params={"q": "grey cat Pixel"}, headers=ALPHA).json()
    assert all(h["id"] != "D1:1" for h in hits)
    lee = client.delete("/v1/memory/people/Lee", headers=ALPHA).json()
    assert lee == {"deleted": 3}  # what Lee said; Ana's messages to Lee stay
    ana = client.delete("/v1/memory/people/Ana", params={"received": True}, headers=ALPHA)
    assert ana.json() == {"deleted": 3}
    refused = client.post("/v1/memory/reset", headers=ALPHA)
    assert refused.status_code == 400 and "confirm=yes" in refused.json()["error"]["message"]
    assert client.post("/v1/memory/reset", params={"confirm": "yes"}, headers=ALPHA).json() == {
        "reset": True
    }


def test_merge_and_split_people_over_rest(client) -> None:  # noqa: F811
    add_ana_lee(client)
    drain(client)
    people = {p["name"]: p["id"] for p in client.get("/v1/memory/people", headers=ALPHA).json()}
    body = {"keep": people["Ana"], "drop": people["Lee"], "reason": "one account"}
    merged = client.post("/v1/memory/people/merge", json=body, headers=ALPHA).json()
    assert merged["id"] == people["Ana"] and len(merged["identities"]) == 2
    split = client.post(
        f"/v1/memory/people/{people['Ana']}/split",
        json={"conversation": "ana-lee", "name": "Lee", "reason": "two people after all"},
        headers=ALPHA,
    ).json()
    assert split["name"] == "Lee" and split["identities"] == [["ana-lee", "Lee"]]
    verdicts = client.get("/v1/memory/decisions", headers=ALPHA).json()
    assert [(d["verdict"], d["method"]) for d in verdicts][-2:] == [
        ("MERGE", "user"),
        ("SEPARATE", "user"),
    ]
    r = client.post(
        "/v1/memory/people/nobody/split",
        json=body | {"conversation": "x", "name": "y"},
        headers=ALPHA,
    )
    assert r.status_code == 404 and "nobody" in r.json()["error"]["message"]
