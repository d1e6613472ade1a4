"""Check a batch-9 chat file: python3 check.py FILE.json  (prints OK and counts, or the problems)."""
import json, re, sys
LABELS = {"answers", "yes", "no"}
WH = {"answers"}
def main(path):
    d = json.load(open(path))
    probs, nq, nm, nmsg = [], 0, 0, 0
    ids_seen = set()
    for ci, c in enumerate(d.get("chats", [])):
        where = f"chat {c.get('id', ci)}"
        if c.get("id") in ids_seen: probs.append(f"{where}: duplicate chat id")
        ids_seen.add(c.get("id"))
        people = c.get("people") or []
        if len(people) < 2: probs.append(f"{where}: needs 2+ people")
        msgs = {}
        last = ""
        for m in c.get("messages", []):
            for k in ("id", "speaker", "said_at", "text"):
                if not isinstance(m.get(k), str) or not m[k].strip(): probs.append(f"{where} msg {m.get('id')}: missing {k}")
            if m.get("speaker") not in people: probs.append(f"{where} msg {m.get('id')}: speaker not in people")
            if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d", m.get("said_at", "")): probs.append(f"{where} msg {m.get('id')}: said_at must be YYYY-MM-DDTHH:MM")
            elif m["said_at"] < last: probs.append(f"{where} msg {m.get('id')}: said_at goes back in time")
            else: last = m["said_at"]
            if m.get("id") in msgs: probs.append(f"{where}: duplicate message id {m.get('id')}")
            msgs[m.get("id")] = m.get("text", "")
        nmsg += len(msgs)
        if not 10 <= len(msgs) <= 30: probs.append(f"{where}: {len(msgs)} messages (want 10-30)")
        qs = c.get("questions", [])
        if not 4 <= len(qs) <= 9: probs.append(f"{where}: {len(qs)} questions (want 4-9)")
        for qi, q in enumerate(qs):
            w = f"{where} q{qi}"
            if not isinstance(q.get("q"), str) or not q["q"].strip().endswith("?"): probs.append(f"{w}: q must be a question ending in ?")
            if q.get("person") not in people and not any(q.get("person", "#") in t for t in msgs.values()): probs.append(f"{w}: person {q.get('person')!r} is nobody in the chat")
            if q.get("form") not in ("wh", "yes_no"): probs.append(f"{w}: form must be wh or yes_no")
            marks = q.get("marks", [])
            if not marks: probs.append(f"{w}: no marks (every question needs at least one sentence that answers it)")
            for mk in marks:
                if mk.get("msg") not in msgs: probs.append(f"{w}: mark msg {mk.get('msg')!r} not in chat"); continue
                if mk.get("quote", "") == "" or mk["quote"] not in msgs[mk["msg"]]: probs.append(f"{w}: quote {mk.get('quote')!r} is not an exact substring of msg {mk['msg']}")
                lab = mk.get("label")
                if q.get("form") == "wh" and lab != "answers": probs.append(f"{w}: a wh question's marks are label 'answers'")
                if q.get("form") == "yes_no" and lab not in ("yes", "no"): probs.append(f"{w}: a yes_no question's marks are 'yes' or 'no'")
                if not isinstance(mk.get("current"), bool): probs.append(f"{w}: mark needs current: true/false")
                nm += 1
            nq += 1
    if probs:
        print("\n".join(probs[:60])); print(f"{len(probs)} problems"); sys.exit(1)
    print(f"OK: {len(d['chats'])} chats, {nmsg} messages, {nq} questions, {nm} marks")
main(sys.argv[1])
